"""Read-only share links: made and revoked by the owner, opened logged out, expiry, tampering, the socket."""
from __future__ import annotations

import json
from datetime import timedelta

import pytest
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser
from django.core import signing
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from playground.conversations import events as ev
from playground.conversations import sharing
from playground.conversations.events import record_event
from playground.conversations.models import Conversation, ShareLink
from playground.conversations.routing import websocket_urlpatterns
from playground.realtime import CLOSE_FORBIDDEN

SECRET = "sk-ant-api03-share-link-secret"


def conversation_of(owner) -> Conversation:
    conversation = Conversation.objects.create(owner=owner, title="Weather in Paris")
    record_event(conversation, ev.ChatMessage(role="user", text="What is the weather forecast for Paris?"))
    record_event(conversation, ev.ModelRequest(provider="anthropic", model="m", message_count=1, tool_count=0,
                                               body=ev.request_body({"model": "m", "api_key": SECRET, "extra_headers": {"x-api-key": SECRET}})))
    record_event(conversation, ev.ChatMessage(role="assistant", text="Sunny, 21 degrees."))
    return conversation


def create_link(client, conversation, hours=24):
    return client.post(reverse("conversations:share_create", args=[conversation.pk]), {"hours": hours})


@pytest.mark.django_db
def test_the_owner_creates_a_link_that_opens_the_conversation_logged_out(admin_client, admin_user):
    conversation = conversation_of(admin_user)
    response = create_link(admin_client, conversation, hours=8)
    assert response.status_code == 302
    link = ShareLink.objects.get(conversation=conversation)
    assert timedelta(hours=7, minutes=59) < link.expires_at - timezone.now() <= timedelta(hours=8)
    token = sharing.token_for(link)
    # One address per link, whenever it is asked for: no second-of-signing in it (it made the page's
    # address and this one differ when they were made a second apart).
    assert token.count(":") == 1 and sharing.token_for(ShareLink.objects.get(pk=link.pk)) == token
    page = admin_client.get(reverse("conversations:detail", args=[conversation.pk])).content.decode()
    assert f"/conversations/shared/{token}/" in page and 'data-testid="share-revoke"' in page

    shared = Client().get(reverse("conversations:shared", args=[token]))
    html = shared.content.decode()
    assert shared.status_code == 200
    assert "Sunny, 21 degrees." in html and "What is the weather forecast for Paris?" in html
    assert f'ws-connect="/ws/shared/{token}/"' in html and "data-shared" in html
    # Read-only and nothing else: no send or cancel form, no navigation, no export, no secret.
    assert 'data-testid="send-form"' not in html and 'data-testid="cancel"' not in html
    assert "export.json" not in html and f'href="{reverse("conversations:list")}"' not in html
    assert SECRET not in html


@pytest.mark.django_db
def test_an_expired_link_says_so_and_a_tampered_one_is_not_valid(admin_user):
    conversation = conversation_of(admin_user)
    link = sharing.create_link(conversation, user=admin_user, hours=1)
    token = sharing.token_for(link)
    tampered = token[:-2] + ("AA" if not token.endswith("AA") else "BB")
    for bad in (tampered, "not-a-token", signing.dumps(link.pk, salt="another purpose"), signing.dumps("x", salt=sharing.TOKEN_SALT),
                signing.Signer(salt="another purpose").sign_object(link.pk)):
        response = Client().get(reverse("conversations:shared", args=[bad]))
        html = response.content.decode()
        assert response.status_code == 404, bad
        assert ("This link is not valid" in html or "This link no longer exists" in html) and "Sunny" not in html, bad
    ShareLink.objects.filter(pk=link.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    for name in ("conversations:shared", "conversations:shared_present"):
        response = Client().get(reverse(name, args=[token]))
        assert response.status_code == 410 and "This link has expired" in response.content.decode()
        assert "Sunny" not in response.content.decode()


@pytest.mark.django_db
def test_a_revoked_link_stops_working_and_leaves_the_list(admin_client, admin_user):
    conversation = conversation_of(admin_user)
    create_link(admin_client, conversation)
    link = ShareLink.objects.get(conversation=conversation)
    token = sharing.token_for(link)
    assert Client().get(reverse("conversations:shared", args=[token])).status_code == 200
    response = admin_client.post(reverse("conversations:share_revoke", args=[conversation.pk, link.pk]))
    assert response.status_code == 302
    refused = Client().get(reverse("conversations:shared", args=[token]))
    assert refused.status_code == 410 and "This link was revoked" in refused.content.decode()
    page = admin_client.get(reverse("conversations:detail", args=[conversation.pk])).content.decode()
    assert token not in page and 'data-testid="no-share-links"' in page


@pytest.mark.django_db
def test_only_the_owner_or_an_admin_shares_and_the_expiry_is_bounded(client, admin_user, viewer_user, settings):
    conversation = conversation_of(admin_user)
    client.force_login(viewer_user)  # an operator, not the owner
    assert create_link(client, conversation).status_code == 404
    page = client.get(reverse("conversations:detail", args=[conversation.pk])).content.decode()
    assert 'data-testid="share"' not in page
    owner = Client()
    owner.force_login(admin_user)
    settings.SHARE_LINK_MAX_HOURS = 24
    create_link(owner, conversation, hours=24 * 7)  # not offered any more: refused with the choices
    assert not ShareLink.objects.exists()
    with pytest.raises(ValueError):
        sharing.create_link(conversation, user=admin_user, hours=25)


# -- the socket -----------------------------------------------------------------------------------------
async def connect_shared(token: str, user=None) -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(URLRouter(websocket_urlpatterns), f"/ws/shared/{token}/")
    communicator.scope["user"] = user or AnonymousUser()
    connected, _ = await communicator.connect(timeout=10)
    assert connected
    return communicator


async def closed_with(communicator) -> int | None:
    message = await communicator.receive_output(timeout=5)
    return message.get("code") if message["type"] == "websocket.close" else None


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_the_shared_socket_streams_read_only_and_refuses_bad_links(redis, admin_user):
    conversation = await database_sync_to_async(conversation_of)(admin_user)
    link = await database_sync_to_async(sharing.create_link)(conversation, user=admin_user, hours=1)
    token = sharing.token_for(link)

    communicator = await connect_shared(token)
    await communicator.send_to(text_data=json.dumps({"action": "hello", "last_sequence": 0}))
    frames = [await communicator.receive_from(timeout=5) for _ in range(3)]
    assert "Sunny, 21 degrees." in frames[2] and not any(SECRET in f for f in frames)
    # Live: a new event reaches the logged-out socket.
    await database_sync_to_async(record_event)(conversation.pk, ev.ChatMessage(role="assistant", text="And tomorrow rain."))
    assert "And tomorrow rain." in await communicator.receive_from(timeout=5)
    # Nothing that acts: a send is refused with a notice, no message is recorded.
    await communicator.send_to(text_data=json.dumps({"action": "send", "text": "hijack"}))
    assert "shared, read-only view" in await communicator.receive_from(timeout=5)
    assert not await database_sync_to_async(conversation.events.filter(payload__text="hijack").exists)()

    # Revoked while open: the page is closed with 4403.
    await database_sync_to_async(sharing.revoke_link)(link, user=admin_user)
    assert await closed_with(communicator) == CLOSE_FORBIDDEN
    await communicator.disconnect()

    # A revoked, a tampered and an expired link are refused after the handshake (no retry loop).
    for bad in (token, token[:-3] + "xyz"):
        refused = await connect_shared(bad)
        assert await closed_with(refused) == CLOSE_FORBIDDEN
        await refused.disconnect()
    fresh = await database_sync_to_async(sharing.create_link)(conversation, user=admin_user, hours=1)
    await database_sync_to_async(ShareLink.objects.filter(pk=fresh.pk).update)(expires_at=timezone.now() - timedelta(seconds=1))
    refused = await connect_shared(sharing.token_for(fresh))
    assert await closed_with(refused) == CLOSE_FORBIDDEN
    await refused.disconnect()


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_the_shared_socket_closes_when_the_link_expires(redis, admin_user):
    conversation = await database_sync_to_async(conversation_of)(admin_user)
    link = await database_sync_to_async(sharing.create_link)(conversation, user=admin_user, hours=1)
    await database_sync_to_async(ShareLink.objects.filter(pk=link.pk).update)(expires_at=timezone.now() + timedelta(seconds=1.5))
    communicator = await connect_shared(sharing.token_for(link))
    await communicator.send_to(text_data=json.dumps({"action": "hello", "last_sequence": 3}))
    assert await communicator.receive_nothing(timeout=0.3)  # open, nothing owed
    message = await communicator.receive_output(timeout=10)
    assert message["type"] == "websocket.close" and message.get("code") == CLOSE_FORBIDDEN
    await communicator.disconnect()


def opens(token: str) -> int:
    return Client().get(reverse("conversations:shared", args=[token])).status_code


@pytest.mark.django_db
def test_only_the_current_token_format_with_the_links_own_nonce_opens(admin_user, settings):
    """Ids are sequential: a token must carry the link's random nonce, so one signed with any key in
    the repository (or even with this run's) for a guessed id opens nothing; earlier formats neither."""
    conversation = conversation_of(admin_user)
    link = sharing.create_link(conversation, user=admin_user, hours=1)
    other = sharing.create_link(conversation, user=admin_user, hours=1)
    assert link.nonce and other.nonce and link.nonce != other.nonce and len(link.nonce) >= 20
    assert opens(sharing.token_for(link)) == 200 and sharing.token_for(link) != sharing.token_for(other)
    with_this_key = [
        signing.Signer(salt=sharing.TOKEN_SALT).sign_object([link.pk, "guessed-nonce"]),
        signing.Signer(salt=sharing.TOKEN_SALT).sign_object([link.pk, other.nonce]),  # another link's nonce
        signing.Signer(salt=sharing.TOKEN_SALT).sign_object([True, link.nonce]),
        signing.Signer(salt=sharing.TOKEN_SALT).sign_object([float(link.pk), link.nonce]),
        signing.Signer(salt=sharing.TOKEN_SALT).sign_object([str(link.pk), link.nonce]),
        signing.Signer(salt=sharing.TOKEN_SALT).sign_object(link.pk),
        signing.Signer(salt="playground.conversations.share-link.id").sign_object(link.pk),  # the previous format
        signing.dumps(link.pk, salt="playground.conversations.share-link", compress=False),  # the first format
        signing.Signer(salt="playground.conversations.share-link.id").sign_object(True),
    ]
    for token in with_this_key:
        assert opens(token) == 404, token
    # The key that used to be in settings.py, and any other: the exact token for this link, re-signed.
    for key in ("dev-only-insecure-key", "collectstatic-only", "k" * 50):
        forged = signing.Signer(key=key, salt=sharing.TOKEN_SALT).sign_object([link.pk, link.nonce])
        assert opens(forged) == 404, key
    assert settings.SECRET_KEY != "dev-only-insecure-key"


@pytest.mark.django_db
def test_every_existing_link_gets_a_nonce_of_its_own_from_the_migration():
    from importlib import import_module

    from django.apps import apps

    migration = import_module("playground.conversations.migrations.0010_share_link_nonce")
    owner = Conversation.objects.model._meta.get_field("owner").related_model.objects.create(username="old-links")
    conversation = Conversation.objects.create(owner=owner, title="t")
    links = [sharing.create_link(conversation, user=owner, hours=1) for _ in range(3)]
    ShareLink.objects.update(nonce="same-for-all")
    migration.give_each_link_its_own_nonce(apps, None)
    nonces = set(ShareLink.objects.filter(pk__in=[lnk.pk for lnk in links]).values_list("nonce", flat=True))
    assert len(nonces) == 3 and "same-for-all" not in nonces


@pytest.mark.django_db
def test_shared_pages_are_kept_by_no_cache(admin_user):
    conversation = conversation_of(admin_user)
    token = sharing.token_for(sharing.create_link(conversation, user=admin_user, hours=1))
    for name, argument in (("conversations:shared", token), ("conversations:shared_present", token),
                           ("conversations:shared", token[:-2] + "zz")):
        response = Client().get(reverse(name, args=[argument]))
        directives = {d.strip() for d in response["Cache-Control"].split(",")}
        assert {"no-store", "private"} <= directives, (name, response.status_code, response["Cache-Control"])


@pytest.mark.django_db
def test_anonymous_frames_carry_no_forms_no_internal_id_and_no_account_name(admin_user, django_user_model):
    from playground.conversations.fragments import render_event_frame

    owner = django_user_model.objects.create_user(username="carol-owner", password="x")
    # An id no page text holds by chance (pk 8 on PostgreSQL matched `charset="utf-8"`, a small one a date's "-12-").
    conversation = Conversation.objects.create(pk=987_654, owner=owner, title="Push docs")
    record_event(conversation, ev.ChatMessage(role="user", text="Push the docs", author="carol-owner"))
    record_event(conversation, ev.ActedForOwner(actor=admin_user.username, actor_role="admin", action="sent a message"))
    record_event(conversation, ev.PermissionPrompt(tool_use_id="t1", name="mcp__github__push_files",
                                   reason="ask rule", timeout_seconds=60))
    token = sharing.token_for(sharing.create_link(conversation, user=owner, hours=1))
    pages = {name: Client().get(reverse(name, args=[token])).content.decode()
             for name in ("conversations:shared", "conversations:shared_present")}
    frames = [render_event_frame(conversation, event, shared=True) for event in conversation.events.order_by("sequence")]
    for where, html in [*pages.items(), *(("frame", f) for f in frames)]:
        assert "answer-once" not in html and 'name="action"' not in html and "<form" not in html, where
        assert "carol-owner" not in html and admin_user.username not in html, where
        assert f"-{conversation.pk}\"" not in html and f"-{conversation.pk}-" not in html, where
        assert f"/conversations/{conversation.pk}/" not in html and f'data-conversation="{conversation.pk}"' not in html, where
    assert "Waiting for the owner's answer" in pages["conversations:shared"] and ">person<" in pages["conversations:shared"]
    # The members' page of the same conversation still has them.
    member = Client()
    member.force_login(admin_user)
    assert "answer-once" in member.get(reverse("conversations:detail", args=[conversation.pk])).content.decode()


@pytest.mark.django_db
def test_a_broadcast_carries_the_anonymous_frame_while_a_link_works_reading_the_link_once_per_window(admin_user, monkeypatch):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from playground.conversations import broadcast

    sent: list[dict] = []
    monkeypatch.setattr(broadcast, "send_to_group", lambda group, message: sent.append(message))
    monkeypatch.setattr(broadcast, "_share_state", {})
    conversation = conversation_of(admin_user)
    row = conversation.events.order_by("sequence").first()

    def broadcast_it() -> dict:
        broadcast.broadcast_event(conversation.pk, row.sequence, event=row, status="running")
        return sent[-1]

    assert "frame" in broadcast_it() and "shared_frame" not in sent[-1]
    sharing.create_link(conversation, user=admin_user, hours=1)
    monkeypatch.setattr(broadcast, "SHARE_STATE_SECONDS", 0.0)  # the window over: the link is read again
    shared = broadcast_it()["shared_frame"]
    assert f'id="status-{conversation.pk}"' in sent[-1]["frame"]  # the members' frame: the internal id
    assert "Paris" in shared and admin_user.username not in shared
    assert 'id="status-shared"' in shared and f'id="status-{conversation.pk}"' not in shared
    monkeypatch.setattr(broadcast, "SHARE_STATE_SECONDS", 60.0)
    with CaptureQueriesContext(connection) as queries:
        frames = [broadcast_it() for _ in range(3)]
    # Within the window the link is not read again per event (it cost more than the frame's rendering).
    assert not [q for q in queries.captured_queries if "sharelink" in q["sql"].lower()]
    assert all("shared_frame" in frame for frame in frames)

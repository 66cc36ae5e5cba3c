"""The pages of a remote server's OAuth grant: its card on the server's page, Connect, Disconnect,
the callback the authorization server sends the browser back to, and our client ID metadata
document (CIMD). The flow itself is `oauth_connect.py`; no credential is ever rendered."""
from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST, require_safe

from playground.access import ADMIN, VIEWER, role_required
from playground.mcp_servers import oauth, oauth_connect
from playground.mcp_servers.models import McpServer
from playground.mcp_servers.secrets import SECRET_MASK
from playground.mcp_servers.session_pool import session_pool, workbench_pool

admin_only = role_required(ADMIN, message="Only admins can connect MCP servers to an authorization server.")


def callback_url(request: HttpRequest) -> str:
    return request.build_absolute_uri(reverse("mcp_servers:oauth_callback"))


def _forget_sessions(server_id: int) -> None:
    for pool in (session_pool(), workbench_pool()):
        try:
            pool.discard(server_id)
        except Exception:  # noqa: BLE001 - a stale session is replaced on next use anyway
            pass


@role_required(VIEWER)
@require_safe
def server_oauth(request: HttpRequest, pk: int) -> HttpResponse:
    """The grant's card (polled while a Connect is finishing)."""
    server = get_object_or_404(McpServer.objects.select_related("oauth"), pk=pk)
    return render(request, "mcp_servers/_oauth.html", {"server": server})


@admin_only
@require_POST
def server_oauth_connect(request: HttpRequest, pk: int) -> HttpResponse:
    server = get_object_or_404(McpServer, pk=pk)
    if not server.is_remote:
        messages.error(request, "Only a server reached over HTTP (streamable HTTP or SSE) can use OAuth.")
        return redirect("mcp_servers:server_detail", pk=server.pk)
    secret = request.POST.get("client_secret", "")
    oauth_connect.save_client(server, client_id=request.POST.get("client_id", ""),
                              client_secret=None if secret == SECRET_MASK else secret)
    start = oauth_connect.begin(server, redirect_uri=callback_url(request), user_id=request.user.pk)
    if start.url:
        return HttpResponseRedirect(start.url)  # the authorization server's sign-in page
    _forget_sessions(server.pk)
    if start.ok:
        messages.success(request, start.message)
    else:
        messages.error(request, f"Connect failed: {start.message}")
    return redirect("mcp_servers:server_detail", pk=server.pk)


@admin_only
@require_POST
def server_oauth_disconnect(request: HttpRequest, pk: int) -> HttpResponse:
    server = get_object_or_404(McpServer, pk=pk)
    oauth_connect.disconnect(server)
    _forget_sessions(server.pk)
    messages.success(request, f"{server.name} is disconnected: its tokens and registered client were forgotten.")
    return redirect("mcp_servers:server_detail", pk=server.pk)


@admin_only
@require_safe
def oauth_callback(request: HttpRequest) -> HttpResponse:
    """Where the authorization server sends the browser back (`?code=…&state=…` or `?error=…`)."""
    outcome = oauth_connect.callback(
        state=request.GET.get("state", "")[:500], code=request.GET.get("code", ""), iss=request.GET.get("iss", ""),
        error=request.GET.get("error", "")[:200], error_description=request.GET.get("error_description", "")[:500])
    if outcome.server is None:
        return render(request, "mcp_servers/oauth_refused.html", {"message": outcome.message}, status=400)
    (messages.success if outcome.ok else messages.error)(request, outcome.message)
    return redirect("mcp_servers:server_detail", pk=outcome.server.pk)


@require_safe
def oauth_client_metadata(request: HttpRequest) -> HttpResponse:
    """Our client ID metadata document (CIMD): an authorization server that supports it fetches it
    from MCP_OAUTH_CLIENT_METADATA_URL (set it to this page's public HTTPS address), and that URL is
    then our client id there, with no registration. Public: it names the client and its callback only."""
    client_id = oauth.client_metadata_url() or request.build_absolute_uri(request.path)
    document = oauth.client_metadata(callback_url(request)).model_dump(mode="json", exclude_none=True)
    document.update(client_id=client_id, token_endpoint_auth_method="none")
    return JsonResponse(document)

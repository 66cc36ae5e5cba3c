"""Settings of the live server the browser tests drive: the project's own, with one fallback.

`templates/base.html` links a page of every app; while one app's URL names are not merged on a
branch, no page that extends base.html renders. live_urls.py adds placeholders for exactly the
missing nav names (none once every branch is merged, so then this is the project's URLconf).
"""
from playground.settings import *  # noqa: F401,F403

ROOT_URLCONF = "tests.browser.live_urls"

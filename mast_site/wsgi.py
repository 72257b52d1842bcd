"""The WSGI entry point (gunicorn): Django's application, with the collector tuned for web processes."""

import gc
import os

from django.conf import settings
from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mast_site.settings")
application = get_wsgi_application()

# The objects made at start-up (settings, URL patterns, templates, models) live as long as the
# process: freezing them keeps the cyclic garbage collector from walking them again on every
# collection, and a higher first threshold makes collections rarer. Both cut the pauses that
# showed as the slowest saves (issue 18); MAST_GC_GEN0=700 restores CPython's default.
gc.freeze()
gc.set_threshold(settings.MAST_GC_GEN0, 20, 20)

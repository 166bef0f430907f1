"""Runs Django's own cache backend suite (``BaseCacheTests`` of tests/cache/tests.py in
Django's source distribution) against ``halcyon.contrib.django.HalcyonCache``, as
Django runs it for its Redis backend (same settings, same excluded caches), and prints
the outcome as one JSON line.

Usage: python django_suite.py <django sdist>/tests <socket>
"""

from __future__ import annotations

import json
import os
import sys
import unittest


def main(tests_dir: str, socket_path: str) -> int:
    sys.path.insert(0, tests_dir)
    import django
    from django.conf import settings

    backend = {"BACKEND": "halcyon.contrib.django.HalcyonCache", "LOCATION": socket_path}
    settings.configure(
        DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
        INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth", "cache"],
        CACHES={"default": backend},
        SECRET_KEY="halcyon-suite",
        USE_TZ=False,
        DEFAULT_AUTO_FIELD="django.db.models.AutoField",
        MIDDLEWARE=[],
    )
    django.setup()

    from cache.tests import BaseCacheTests, caches_setting_for_tests, redis_excluded_caches  # type: ignore
    from django.test import TestCase, override_settings
    from django.test.runner import DiscoverRunner

    import halcyon

    @override_settings(CACHES=caches_setting_for_tests(base=backend, exclude=redis_excluded_caches))
    class HalcyonCacheTests(BaseCacheTests, TestCase):  # type: ignore[misc]
        # As the Redis backend's suite does, name the error incr/decr of a value that
        # is not a number raises: the daemon's refusal.
        incr_decr_type_error = halcyon.errors.NotAnIntegerError

    runner = DiscoverRunner(verbosity=int(os.environ.get("SUITE_VERBOSITY", "1")))
    runner.setup_test_environment()
    databases = runner.setup_databases()
    try:
        suite = unittest.TestLoader().loadTestsFromTestCase(HalcyonCacheTests)
        result = runner.run_suite(suite)
    finally:
        runner.teardown_databases(databases)
        runner.teardown_test_environment()
    print(json.dumps({
        "suite": f"django {django.get_version()} BaseCacheTests",
        "ran": result.testsRun,
        "failures": [str(t) for t, _ in result.failures] + [str(t) for t in result.unexpectedSuccesses],
        "errors": [str(t) for t, _ in result.errors],
        "skipped": [[str(t).split(" ")[0], reason] for t, reason in result.skipped],
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))

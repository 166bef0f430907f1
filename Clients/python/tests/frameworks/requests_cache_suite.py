"""requests-cache's storage suite (``BaseStorageTest``) and cache suite
(``BaseCacheTest``, which talks to an httpbin) against
``halcyon.contrib.requests_cache``, composed as requests-cache composes them for its
Redis backend (tests/integration/test_redis.py of its source distribution; the tests
of that file that patch redis-py itself have no Halcyon counterpart). Copied into that
distribution's tests/integration and run there by tests/test_framework_suites.py; the
daemon's socket comes in $HALCYON_SOCKET and the httpbin's address in $HTTPBIN_URL.
"""

from tests.integration.base_cache_test import BaseCacheTest
from tests.integration.base_storage_test import BaseStorageTest

from halcyon.contrib.requests_cache import HalcyonCache, HalcyonDict


class TestHalcyonDict(BaseStorageTest):
    storage_class = HalcyonDict
    # Each collection is a key prefix of its own, so instances do not see each other.
    num_instances = 10


class TestHalcyonPicklableDict(TestHalcyonDict):
    picklable = True
    init_kwargs = {"serializer": "pickle"}


class TestHalcyonCache(BaseCacheTest):
    backend_class = HalcyonCache

"""cachelib's shared backend suites (tests/common.py and its siblings in cachelib's
source distribution) against ``halcyon.contrib.cachelib.HalcyonCache``, composed as
cachelib composes them for its RedisCache (also with a custom serializer, and with and
without a key prefix), plus the tests cachelib's RedisCache suite (tests/test_redis_cache.py)
adds to them, taken from it as they are. Copied next to those files and run there by
tests/test_framework_suites.py; the daemon's socket comes in $HALCYON_SOCKET.
"""

import pytest
from clear import ClearTests
from common import CommonTests
from delete_many_with_prefix import DeleteManyWithPrefixTests
from has import HasTests
from serializer import SerializerTests
from test_redis_cache import TestRedisCache as RedisCacheSuite

from halcyon.contrib.cachelib import HalcyonCache, HalcyonSerializer


class SillySerializer(HalcyonSerializer):
    """A serializer of its own, as cachelib's Redis suite injects one."""

    def dumps(self, value, protocol=None):
        return repr(value).encode()

    def loads(self, bvalue):
        if bvalue is None:
            return None
        return eval(bvalue.decode())


class CustomCache(HalcyonCache):
    serializer = SillySerializer()


@pytest.fixture(autouse=True, params=[HalcyonCache, CustomCache])
def cache_factory(request, key_prefix):
    def _factory(self, *args, **kwargs):
        kwargs.setdefault("key_prefix", key_prefix)
        cache = request.param(*args, **kwargs)
        cache.client.clear()
        return cache

    request.cls.cache_factory = _factory


class TestHalcyonCache(CommonTests, ClearTests, HasTests, DeleteManyWithPrefixTests, SerializerTests):
    pass


# RedisCache's own tests beyond the shared classes (in 0.17: test_callable_key), as
# methods of this class, so they run with its cache_factory. The suite class itself is
# not collected here: its marks would start a redis-server.
for _name, _test in vars(RedisCacheSuite).items():
    if _name.startswith("test_"):
        setattr(TestHalcyonCache, _name, _test)

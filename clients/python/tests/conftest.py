import itertools
import os
import sys

import pytest

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__),
                                                "..")))
sys.path.insert(0, os.path.dirname(__file__))

import support  # noqa: E402


@pytest.fixture(scope="session")
def server():
    s = support.RedisServer()
    yield s
    s.stop()


_ns = itertools.count()


@pytest.fixture
def namespace():
    return "py%d-%d" % (os.getpid(), next(_ns))


@pytest.fixture
def build():
    support.need_build()

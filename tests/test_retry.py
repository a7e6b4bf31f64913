"""The one retry backoff (RetryPolicy.wait) every Hub retry sleeps by."""

from publisher.push.hub_client import RetryPolicy


def test_backoff_doubles_up_to_the_cap():
    policy = RetryPolicy(attempts=7, base_seconds=0.5, max_seconds=4.0)
    assert [policy.wait(a) for a in range(1, 7)] == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]

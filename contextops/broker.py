"""The Redis broker transport the workers use: kombu's, made to outlive a lost connection.

When Redis goes away while a worker runs a job, Celery (5.7) first collects the broken
connection, which detaches kombu's transport from its connection settings
(``transport.client = None``), and then closes it. Closing the channel restores the
unacknowledged messages, which needs a Redis connection pool; the pool was dropped with
the broken sockets, and kombu rebuilds it from ``transport.client``: ``None.hostname``,
an ``AttributeError`` that Celery does not take for a connection error, so the worker
stopped with "Unrecoverable error" instead of reconnecting. The same happened to the
acknowledgement of the job in flight once it finished.

Here each channel keeps what its pool was made from (the address, database, password,
timeouts) when it opens, and makes a new pool from that when the transport no longer
knows: the restore then fails as a connection error while Redis is down (and the
messages stay in Redis's unacknowledged set, restored after the visibility timeout),
and the finished job's acknowledgement reaches Redis once it is back.
"""

from typing import Any

import redis
from kombu.transport import redis as kombu_redis


class Channel(kombu_redis.Channel):
    _pool_recipe: tuple[Any, Any, dict[str, Any]] | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # kombu leaves its transports unannotated.
        super().__init__(*args, **kwargs)  # type: ignore[no-untyped-call]  # opens the pool: it pings Redis
        pool = self.pool
        self._pool_recipe = (
            pool.connection_class,
            pool.max_connections,
            dict(pool.connection_kwargs),
        )

    def _get_pool(self, asynchronous: bool = False) -> Any:
        if self.connection.client is None and self._pool_recipe is not None and not asynchronous:
            connection_class, max_connections, kwargs = self._pool_recipe
            return redis.ConnectionPool(
                connection_class=connection_class, max_connections=max_connections, **kwargs
            )
        return super()._get_pool(asynchronous)  # type: ignore[no-untyped-call]


class Transport(kombu_redis.Transport):
    Channel = Channel

"""Private servers for fault tests: a test that stops a server starts its own, on a free port, and stops only that.

with PrivatePostgres() as pg:        # initdb + pg_ctl from `pg_config --bindir`, as the postgres user
    url = pg.url                     # postgresql://postgres@127.0.0.1:PORT/postgres (trust)
    pg.stop()                        # pg_ctl stop -m fast: every connection is cut
    pg.start()                       # the same data directory, the same port
    pg.restart_command()             # the same as one shell command line (for `edinbox chaos`)

PrivatePostgres(folder, settings={"shared_buffers": "2GB"}) keeps its cluster in `folder` (reused when it is there
already, left in place by `__exit__`) and runs it with those settings instead of the tests' `fsync=off`.

with PrivateMariaDB() as db:         # mariadb-install-db + mariadbd (--user=mysql when root), database `test`
    url = db.url                     # mysql://root@127.0.0.1:PORT/test (no password)
    db.stop()                        # SIGTERM: a clean shutdown, every connection cut, open transactions rolled back
    db.start()                       # the same data directory, the same port
    db.restart_command()             # the same as one shell command line (for `edinbox chaos`)

PrivateDatabase(server, name) is a database of its own on one of those servers, shared by several tests (a module's):
its `url` names that database, its stop() and start() act on the server, and creating it starts a server an
earlier test left down.

PrivateServer("nats" | "redis", folder) is a broker killed with SIGKILL and started again on its port and data.

with PrivateRabbitMQ() as rabbit:    # rabbitmq-server as a node of its own (rabbit-test-PORT@localhost), no plugins
    url = rabbit.url                 # amqp://guest:guest@127.0.0.1:PORT/
    rabbit.stop()                    # SIGTERM: a clean shutdown that cuts every connection
    rabbit.start()                   # the same node, data and port
    rabbit.kill()                    # SIGKILL to its process group (a quorum queue may then stay leaderless)
    rabbit.close_connections()       # the broker closes every client connection (CONNECTION_FORCED), runs on

with PrivateSSH() as ssh:            # Debian's /usr/sbin/sshd, its config, host key and authorized_keys in a temp dir
    ssh.url("/data")                 # sftp://USER@127.0.0.1:PORT/ROOT/data?known_hosts=...&key=... (a folder it made)
    ssh.folder("data")               # that folder on the local disk, owned by the login user
    ssh.kill()                       # SIGKILL to it and its sessions: down, every connection cut; start() again
    ssh.pause()                      # SIGSTOP: it accepts connections and answers nothing until ssh.resume()
As root, sshd runs as `nobody` (an unprivileged server logs in only its own user, whose file permissions hold).
"""

from ._databases import PrivateDatabase, PrivateMariaDB, PrivatePostgres, PrivateServer, free_port
from ._rabbitmq import PrivateRabbitMQ
from ._rabbitmq import _low_free_port as _low_free_port  # its range test imports it
from ._ssh import PrivateSSH

__all__ = [
    "PrivateDatabase",
    "PrivateMariaDB",
    "PrivatePostgres",
    "PrivateRabbitMQ",
    "PrivateSSH",
    "PrivateServer",
    "free_port",
]

"""psycopg2 driver for pgowl's client matrix (integration/clients).

It reads one step per line on stdin (the step's name and arguments, separated
by tabs) and answers each with one JSON line on stdout:
{step, error: {code, message} | null, notices: [...], result: {...}, crash}.
Connection settings come from MATRIX_HOST, MATRIX_PORT, MATRIX_USER,
MATRIX_PASSWORD and MATRIX_DATABASE; the tables from MATRIX_ITEMS and
MATRIX_COPY. Run it with Debian's /usr/bin/python3 and python3-psycopg2.
"""

import io
import json
import os
import select
import sys
import threading
import time
import traceback

import psycopg2
import psycopg2.extensions

ENV = os.environ
ITEMS = ENV["MATRIX_ITEMS"]
COPY_TABLE = ENV["MATRIX_COPY"]

# The driver's open connections by name: main, tx, ro, listener, large.
conns = {}
# Notifications the listener received and nobody took yet.
received = []
# NOTICEs of connections closed during the current step.
closed_notices = []


class StepError(Exception):
    """A database error together with the results the step still produced."""

    def __init__(self, err, result):
        super().__init__(str(err))
        self.err = err
        self.result = result


def connect(name, port=None, password=None, autocommit=True):
    conn = psycopg2.connect(
        host=ENV["MATRIX_HOST"],
        port=int(port or ENV["MATRIX_PORT"]),
        user=ENV["MATRIX_USER"],
        password=password if password is not None else ENV["MATRIX_PASSWORD"],
        dbname=ENV["MATRIX_DATABASE"],
        application_name="matrix-psycopg2",
        connect_timeout=10,
        sslmode="disable",
    )
    conn.autocommit = autocommit
    conns[name] = conn
    return conn


def close(name):
    conn = conns.pop(name, None)
    if conn is not None:
        closed_notices.extend(take_notices(name, conn))
        conn.close()


def parse_notice(conn_name, text):
    # libpq formats a notice as "SEVERITY:  message\nDETAIL:  detail\n...".
    severity, _, rest = text.partition(":  ")
    lines = rest.rstrip("\n").split("\n")
    detail = ""
    for line in lines[1:]:
        if line.startswith("DETAIL:  "):
            detail = line[len("DETAIL:  "):]
    return {"conn": conn_name, "severity": severity, "code": "", "message": lines[0], "detail": detail}


def take_notices(name, conn):
    out = [parse_notice(name, n) for n in conn.notices]
    del conn.notices[:]
    return out


def scalar(conn, sql, args=None):
    with conn.cursor() as cur:
        cur.execute(sql, args)
        return cur.fetchone()[0]


def take_notifications(conn):
    for n in conn.notifies:
        received.append({"channel": n.channel, "payload": n.payload})
    del conn.notifies[:]


def step_connect():
    return {"user": scalar(connect("main"), "SELECT current_user")}


def step_auth_bad():
    connect("bad", password="wrong-" + ENV["MATRIX_PASSWORD"])
    close("bad")
    return {}


def step_simple_read(tag):
    # psycopg2 always sends a simple Query, with parameters interpolated client-side.
    return {"count": scalar(conns["main"], "SELECT /* %s */ count(*) FROM %s" % (tag, ITEMS))}


def step_simple_write(tag):
    with conns["main"].cursor() as cur:
        cur.execute("INSERT /* %s */ INTO %s (v) VALUES (%%s)" % (tag, ITEMS), ("simple write",))
        return {"rowcount": cur.rowcount}


def step_prepared(read_tag, write_tag, n):
    # psycopg2 has no protocol-level prepared statements: SQL PREPARE/EXECUTE,
    # on a connection of its own because PREPARE pins the session.
    conn = connect("prep")
    reads = writes = 0
    try:
        with conn.cursor() as cur:
            cur.execute("PREPARE matrix_read(int) AS SELECT /* %s */ v FROM %s WHERE id = $1" % (read_tag, ITEMS))
            cur.execute("PREPARE matrix_write(text) AS INSERT /* %s */ INTO %s (v) VALUES ($1) RETURNING id" % (write_tag, ITEMS))
            for i in range(1, int(n) + 1):
                ident = (i - 1) % 10 + 1
                cur.execute("EXECUTE matrix_read(%s)", (ident,))
                if cur.fetchone()[0] == "item %d" % ident:
                    reads += 1
                cur.execute("EXECUTE matrix_write(%s)", ("prepared %d" % i,))
                if cur.fetchone() is not None:
                    writes += 1
    except psycopg2.Error as err:
        raise StepError(err, {"reads": reads, "writes": writes})
    finally:
        close("prep")
    return {"reads": reads, "writes": writes}


def step_tx_commit(tag, value):
    # Without autocommit psycopg2 sends BEGIN before the first statement.
    conn = conns.get("tx") or connect("tx", autocommit=False)
    try:
        ident = scalar(conn, "INSERT INTO %s (v) VALUES (%%s) RETURNING id" % ITEMS, (value,))
        seen = scalar(conn, "SELECT /* %s */ v FROM %s WHERE id = %%s" % (tag, ITEMS), (ident,))
        conn.commit()
    except psycopg2.Error:
        conn.rollback()
        raise
    return {"id": ident, "seen": seen}


def step_tx_rollback(value):
    conn = conns.get("tx") or connect("tx", autocommit=False)
    with conn.cursor() as cur:
        cur.execute("INSERT INTO %s (v) VALUES (%%s)" % ITEMS, (value,))
    conn.rollback()
    return {}


def step_tx_readonly(tag):
    conn = conns.get("ro")
    if conn is None:
        conn = connect("ro", autocommit=False)
        conn.set_session(readonly=True, autocommit=False)
    try:
        count = scalar(conn, "SELECT /* %s */ count(*) FROM %s" % (tag, ITEMS))
        conn.commit()
    except psycopg2.Error:
        conn.rollback()
        raise
    return {"count": count}


def step_copy_in(n):
    data = "".join("%d\tcopy row %d\n" % (i, i) for i in range(1, int(n) + 1))
    with conns["main"].cursor() as cur:
        cur.copy_expert("COPY %s (id, v) FROM STDIN" % COPY_TABLE, io.StringIO(data))
        return {"rows": cur.rowcount}


class LineCounter:
    """A file-like sink that counts COPY lines and sums their first column."""

    def __init__(self):
        self.lines = 0
        self.id_sum = 0
        self.rest = ""

    def write(self, data):
        if isinstance(data, bytes):
            data = data.decode()
        parts = (self.rest + data).split("\n")
        self.rest = parts.pop()
        for line in parts:
            self.lines += 1
            self.id_sum += int(line.split("\t")[0])
        return len(data)


def step_copy_out(tag):
    sink = LineCounter()
    with conns["main"].cursor() as cur:
        cur.copy_expert("COPY /* %s */ %s TO STDOUT" % (tag, COPY_TABLE), sink)
    return {"lines": sink.lines, "id_sum": sink.id_sum}


def step_batch_error(first, third):
    # Three statements in one simple Query: the second fails, so the implicit
    # transaction keeps nothing.
    main = conns["main"]
    failure = None
    try:
        with main.cursor() as cur:
            cur.execute(
                "INSERT INTO {t} (v) VALUES (%s); SELECT 1 / (SELECT count(*) - count(*) FROM {t}); "
                "INSERT INTO {t} (v) VALUES (%s)".format(t=ITEMS), (first, third))
    except psycopg2.Error as err:
        failure = err
    result = {"after": scalar(main, "SELECT 40 + %s", (2,))}
    if failure is not None:
        raise StepError(failure, result)
    return result


def step_cancel():
    main = conns["main"]
    timer = threading.Timer(0.3, main.cancel)
    began = time.monotonic()
    failure = None
    timer.start()
    try:
        scalar(main, "SELECT pg_sleep(30)")
    except psycopg2.Error as err:
        failure = err
    finally:
        timer.cancel()
    result = {"elapsed_ms": int((time.monotonic() - began) * 1000)}
    result["after"] = scalar(main, "SELECT 40 + %s", (2,))
    if failure is not None:
        raise StepError(failure, result)
    return result


def step_listen(channel):
    del received[:]
    conn = conns.get("listener") or connect("listener")
    with conn.cursor() as cur:
        cur.execute("LISTEN %s" % channel)
    return {}


def step_notify(channel, payload):
    conn = connect("notifier")
    try:
        with conn.cursor() as cur:
            cur.execute("NOTIFY %s, %%s" % channel, (payload,))
    finally:
        close("notifier")
    return {}


def step_wait_notification(ms):
    # Wait without sending anything on the listener connection.
    conn = conns["listener"]
    deadline = time.monotonic() + int(ms) / 1000
    take_notifications(conn)
    while not received:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        if select.select([conn], [], [], remaining)[0]:
            conn.poll()
            take_notifications(conn)
    got = list(received)
    del received[:]
    return {"notifications": got}


def step_poll_notification():
    conn = conns["listener"]
    scalar(conn, "SELECT 1")
    take_notifications(conn)
    got = list(received)
    del received[:]
    return {"notifications": got}


def step_listener_read(tag):
    return {"v": scalar(conns["listener"], "SELECT /* %s */ 1" % tag)}


def step_unlisten():
    with conns["listener"].cursor() as cur:
        cur.execute("UNLISTEN *")
    return {}


def step_large(port, rows, width, close_after=""):
    # A named (server-side) cursor streams in FETCHes of itersize rows; it
    # needs a transaction, read-only so that it runs on a standby.
    conn = conns.get("large")
    if conn is None:
        conn = connect("large", port=port, autocommit=False)
        conn.set_session(readonly=True, autocommit=False)
    count = size = 0
    began = time.monotonic()
    with conn.cursor(name="matrix_large") as cur:
        cur.itersize = 10000
        cur.execute("SELECT g AS id, repeat('x', %d) AS v FROM generate_series(1, %d) g" % (int(width), int(rows)))
        for row in cur:
            count += 1
            size += len(row[1])
    conn.commit()
    elapsed = int((time.monotonic() - began) * 1000)
    if close_after == "close":
        close("large")
    return {"rows": count, "bytes": size, "elapsed_ms": elapsed}


def step_ryw_rounds(table, rounds):
    """Read your writes on one connection (session scope): write a row, read
    it back at once. Only the reads' NOTICEs are reported (ryw_read)."""
    conn = conns.get("ryw_read") or connect("ryw_read")
    stale, first = 0, ""
    n = int(rounds)
    reads = []  # conn.notices keeps only the last 50
    for i in range(1, n + 1):
        with conn.cursor() as cur:
            cur.execute("UPDATE %s SET v = %%s WHERE k = 1" % table, (i,))
        del conn.notices[:]
        got = scalar(conn, "SELECT v FROM %s WHERE k = 1" % table)
        reads.extend(conn.notices)
        del conn.notices[:]
        if got < i:
            stale += 1
            if not first:
                first = "round %d read %d" % (i, got)
    conn.notices.extend(reads)
    return {"rounds": n, "stale": stale, "first_stale": first}


STEPS = {name[len("step_"):]: fn for name, fn in globals().items() if name.startswith("step_")}


def run_step(name, args):
    out = {"step": name, "error": None, "notices": [], "result": {}, "crash": ""}
    fn = STEPS.get(name)
    if fn is None:
        out["crash"] = "unknown step " + name
        return out
    try:
        out["result"] = fn(*args) or {}
    except StepError as err:
        out["error"] = error_of(err.err)
        out["result"] = err.result
    except psycopg2.Error as err:
        out["error"] = error_of(err)
    except Exception:  # a failure of the driver itself
        out["crash"] = traceback.format_exc()
    notices = list(closed_notices)
    del closed_notices[:]
    for conn_name, conn in list(conns.items()):
        if not conn.closed:
            notices.extend(take_notices(conn_name, conn))
    out["notices"] = notices
    return out


def error_of(err):
    return {"code": err.pgcode or "", "message": (err.pgerror or str(err)).strip()}


def main():
    while True:
        line = sys.stdin.readline()
        if not line:
            break
        line = line.rstrip("\n")
        if not line:
            continue
        name, *args = line.split("\t")
        if name == "quit":
            break
        sys.stdout.write(json.dumps(run_step(name, args)) + "\n")
        sys.stdout.flush()
    for conn in conns.values():
        conn.close()


if __name__ == "__main__":
    main()

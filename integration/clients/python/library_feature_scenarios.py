"""psycopg2 scenarios the client matrix lacks: `library_feature_scenarios.py SCENARIO [ARGS]` prints
one JSON line {scenario, error, crash, notices, result}."""

import io
import json
import os
import sys
import traceback

import psycopg2
import psycopg2.extras

ENV = os.environ
ITEMS = ENV["MATRIX_ITEMS"]
COPY_TABLE = ENV["MATRIX_COPY"]
conns = {}


def connect(name, autocommit=True):
    conn = psycopg2.connect(host=ENV["MATRIX_HOST"], port=int(ENV["MATRIX_PORT"]), user=ENV["MATRIX_USER"],
                            password=ENV["MATRIX_PASSWORD"], dbname=ENV["MATRIX_DATABASE"],
                            application_name="review5-psycopg2", connect_timeout=10, sslmode="disable")
    conn.autocommit = autocommit
    conns[name] = conn
    return conn


def parse_notice(conn_name, text):
    severity, _, rest = text.partition(":  ")
    lines = rest.rstrip("\n").split("\n")
    detail = ""
    for line in lines[1:]:
        if line.startswith("DETAIL:  "):
            detail = line[len("DETAIL:  "):]
    return {"conn": conn_name, "severity": severity, "code": "", "message": lines[0], "detail": detail}


def take(name):
    conn = conns[name]
    out = [parse_notice(name, n) for n in conn.notices]
    del conn.notices[:]
    return out


def fetch_ids(cur, size):
    ids = []
    while True:
        rows = cur.fetchmany(size)
        if not rows:
            break
        ids.extend(str(r[0]) for r in rows)
    return ids


def sc_withhold_autocommit():
    conn = connect("main")
    cur = conn.cursor(name="review5_hold", withhold=True)
    cur.itersize = 3
    cur.execute("SELECT id FROM %s WHERE id <= 10 ORDER BY id" % ITEMS)
    ids = fetch_ids(cur, 3)
    cur.close()
    notices = take("main")
    with conn.cursor() as c2:
        c2.execute("SELECT 1")
    return {"ids": ",".join(ids)}, notices + [dict(n, conn="after") for n in take("main")]


def sc_withhold_in_tx():
    conn = connect("main", autocommit=False)
    cur = conn.cursor(name="review5_hold_tx", withhold=True)
    cur.execute("SELECT id FROM %s WHERE id <= 10 ORDER BY id" % ITEMS)
    ids = [str(r[0]) for r in cur.fetchmany(4)]
    conn.commit()
    ids += fetch_ids(cur, 3)
    cur.close()
    conn.commit()
    with conn.cursor() as c2:
        c2.execute("SELECT 1")
    conn.commit()
    return {"ids": ",".join(ids)}, take("main")


def sc_withhold_readonly_tx():
    conn = connect("main", autocommit=False)
    conn.set_session(readonly=True, autocommit=False)
    cur = conn.cursor(name="review5_hold_ro", withhold=True)
    cur.execute("SELECT id FROM %s WHERE id <= 10 ORDER BY id" % ITEMS)
    ids = [str(r[0]) for r in cur.fetchmany(4)]
    conn.commit()
    ids += fetch_ids(cur, 3)
    cur.close()
    conn.commit()
    return {"ids": ",".join(ids)}, take("main")


def sc_readonly_autocommit(tag):
    conn = connect("main")
    conn.set_session(readonly=True, autocommit=True)
    with conn.cursor() as cur:
        cur.execute("SELECT /* %s */ count(*) FROM %s" % (tag, ITEMS))
        count = cur.fetchone()[0]
    code = msg = ""
    try:
        with conn.cursor() as cur:
            cur.execute("INSERT INTO %s (v) VALUES ('readonly write')" % ITEMS)
    except psycopg2.Error as err:
        code, msg = err.pgcode or "", (err.pgerror or "").strip()
    return {"count": count, "write_code": code, "write_msg": msg}, take("main")


def sc_serializable_autocommit():
    conn = connect("main")
    conn.set_session(isolation_level="SERIALIZABLE", autocommit=True)
    with conn.cursor() as cur:
        cur.execute("SELECT count(*) FROM %s" % ITEMS)
        cur.fetchone()
        cur.execute("INSERT INTO %s (v) VALUES ('serializable write') RETURNING id" % ITEMS)
        cur.fetchone()
        cur.execute("SHOW transaction_isolation")
        iso = cur.fetchone()[0]
        cur.execute("SELECT v FROM %s WHERE id = 1" % ITEMS)
        cur.fetchone()
    return {"iso": iso}, take("main")


def sc_execute_values_batch(value):
    conn = connect("main")
    with conn.cursor() as cur:
        psycopg2.extras.execute_values(cur, "INSERT INTO %s (v) VALUES %%s" % ITEMS,
                                       [("%s-v%d" % (value, i),) for i in range(100)], page_size=30)
        psycopg2.extras.execute_batch(cur, "INSERT INTO %s (v) VALUES (%%s)" % ITEMS,
                                      [("%s-b%d" % (value, i),) for i in range(100)], page_size=30)
    return {}, take("main")


def sc_copy_expert_in_tx():
    conn = connect("main", autocommit=False)
    with conn.cursor() as cur:
        cur.execute("SELECT count(*) FROM %s" % COPY_TABLE)
        before = cur.fetchone()[0]
        data = "".join("%d\treview5 row %d\n" % (100000 + i, i) for i in range(100))
        cur.copy_expert("COPY %s (id, v) FROM STDIN" % COPY_TABLE, io.StringIO(data))
        cur.execute("SELECT count(*) FROM %s WHERE v LIKE 'review5 row %%'" % COPY_TABLE)
        seen = cur.fetchone()[0]
    conn.rollback()
    return {"seen": seen, "before": before}, take("main")


def main():
    scenario, args = sys.argv[1], sys.argv[2:]
    out = {"scenario": scenario, "error": None, "crash": "", "notices": [], "result": {}}
    try:
        out["result"], out["notices"] = globals()["sc_" + scenario](*args)
    except psycopg2.Error as err:
        out["error"] = {"code": err.pgcode or "", "message": (err.pgerror or str(err)).strip()}
        for name in conns:
            try:
                out["notices"].extend(take(name))
            except Exception:
                pass
    except Exception:
        out["crash"] = traceback.format_exc()
    sys.stdout.write(json.dumps(out, default=str) + "\n")
    for c in conns.values():
        try:
            c.close()
        except Exception:
            pass


if __name__ == "__main__":
    main()

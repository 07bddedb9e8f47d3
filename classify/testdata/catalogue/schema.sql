-- The objects every catalogue golden case may use; each case's "setup" adds its own functions and views.
CREATE EXTENSION pg_stat_statements;
CREATE SCHEMA lib;
CREATE SCHEMA alice; -- "$user" for the cases that classify as user alice
CREATE TABLE t (id int PRIMARY KEY, v text, n int);
CREATE TABLE audit (at timestamptz DEFAULT now(), msg text);
CREATE TABLE lib.items (id int PRIMARY KEY, name text);
CREATE TABLE public.pg_stat_mine (x int); -- named like a statistics view, but an ordinary table
CREATE SEQUENCE s;
INSERT INTO t SELECT g, 'v' || g, g % 3 FROM generate_series(1, 20) AS g;
INSERT INTO lib.items VALUES (1, 'one'), (2, 'two');
CREATE MATERIALIZED VIEW mv AS SELECT id FROM t;
ANALYZE;

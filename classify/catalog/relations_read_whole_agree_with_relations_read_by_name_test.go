package catalog

import (
	"reflect"
	"testing"
	"time"

	"github.com/pgowl/pgowl/classify"
)

// TestRelationsReadWholeAgreeWithRelationsReadByName reads the relations of a schema that has
// every kind of thing a write runs besides the statement (triggers, defaults and CHECK
// constraints calling user functions and session-changing built-ins, generated columns, domains
// with CHECKs, rules, read and write policies, partitions, foreign keys) three ways: whole (each kind gathered
// for every relation at once), by name and by OID range (looked up per relation). The three must
// agree relation by relation: a whole load and a session's read of the change may not see
// different writes.
func TestRelationsReadWholeAgreeWithRelationsReadByName(t *testing.T) {
	primary, ctx := startPrimaryForTest(t, 2*time.Minute)
	conn := connectForTest(t, ctx, primary)
	if _, err := conn.Exec(ctx, `
CREATE FUNCTION stamp() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
CREATE FUNCTION next_code() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$;
CREATE FUNCTION positive(int) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$ SELECT $1 > 0 $$;
CREATE FUNCTION doubled(int) RETURNS int LANGUAGE sql IMMUTABLE AS $$ SELECT $1 * 2 $$;
CREATE DOMAIN small_positive AS int CHECK (VALUE BETWEEN 1 AND 9);
CREATE DOMAIN unchecked AS text;
CREATE TABLE parent (id int PRIMARY KEY, code int DEFAULT next_code(), made timestamptz DEFAULT now(),
  tag text DEFAULT set_config('app.tag', 'x', false), CHECK (positive(id)), CHECK (id < 1000000),
  twice int GENERATED ALWAYS AS (doubled(id)) STORED, thrice int GENERATED ALWAYS AS (id * 3) STORED, level small_positive, note unchecked);
CREATE TRIGGER parent_stamp BEFORE INSERT ON parent FOR EACH ROW EXECUTE FUNCTION stamp();
CREATE TRIGGER parent_off BEFORE UPDATE ON parent FOR EACH ROW EXECUTE FUNCTION stamp();
ALTER TABLE parent DISABLE TRIGGER parent_off;
CREATE TABLE child (id int PRIMARY KEY, parent int REFERENCES parent(id), CHECK (positive(parent)) NOT VALID);
CREATE TABLE plain (id int);
CREATE TABLE ruled (id int);
CREATE RULE ruled_log AS ON INSERT TO ruled DO ALSO INSERT INTO plain VALUES (NEW.id);
CREATE TABLE guarded (id int, owner text);
ALTER TABLE guarded ENABLE ROW LEVEL SECURITY;
CREATE POLICY mine ON guarded FOR SELECT USING (owner = current_user);
CREATE POLICY added ON guarded FOR INSERT WITH CHECK (positive(id));
CREATE POLICY removed ON guarded FOR DELETE USING (positive(id) AND owner = current_user);
CREATE TABLE measures (at date, value int DEFAULT next_code()) PARTITION BY RANGE (at);
CREATE TABLE measures_2026 PARTITION OF measures FOR VALUES FROM ('2026-01-01') TO ('2027-01-01');
CREATE TRIGGER measures_stamp BEFORE INSERT ON measures_2026 FOR EACH ROW EXECUTE FUNCTION stamp();
CREATE VIEW parent_view AS SELECT id FROM parent;
CREATE UNLOGGED TABLE scratch (id int DEFAULT pg_advisory_lock(1)::text::int);
`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "SET search_path = pg_catalog; "+withoutJIT); err != nil {
		t.Fatal(err)
	}
	var warnings []string
	whole, err := readRows(ctx, conn, relationsPart, filter{}, &warnings)
	if err != nil {
		t.Fatal(err)
	}
	ranged, err := readRows(ctx, conn, relationsPart, filter{First: 0, Last: ^uint32(0), ranged: true}, &warnings)
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 0 {
		t.Fatalf("warnings: %v", warnings)
	}
	if !reflect.DeepEqual(whole, ranged) {
		t.Errorf("the whole read and the read of every OID differ:\nwhole:  %+v\nranged: %+v", whole, ranged)
	}
	byName := map[string]classify.Relation{}
	var names []string
	for _, r := range whole {
		if r.Schema == "public" {
			names = append(names, r.Name)
		}
	}
	named, err := readRows(ctx, conn, relationsPart, filter{Names: names}, &warnings)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range named {
		byName[r.Name] = r
	}
	writes := 0
	for _, r := range whole {
		if r.Schema != "public" {
			continue
		}
		if got, ok := byName[r.Name]; !ok || !reflect.DeepEqual(got, r) {
			t.Errorf("%s read by name: %+v; read whole: %+v", r.Name, got, r)
		}
		if r.WriteRuns != "" {
			writes++
		}
	}
	const want = "(public.stamp()), (public.next_code()), (set_config('app.tag'::text, 'x'::text, false)), (public.doubled(id)), " +
		"((public.positive(id))), (NULL::public.small_positive)"
	const wantGuarded = "(public.positive(id)), ((public.positive(id) AND (owner = CURRENT_USER)))"
	// The schema gives most tables something a write runs: a read that found none compares nothing.
	if writes < 5 {
		t.Fatalf("only %d relations run anything beside a write: %+v", writes, whole)
	}
	for _, r := range whole {
		if r.Name == "parent" && r.WriteRuns != want {
			t.Errorf("parent runs beside a write:\n%s\nwant\n%s", r.WriteRuns, want)
		}
		if r.Name == "guarded" && r.WriteRuns != wantGuarded {
			t.Errorf("guarded runs beside a write:\n%s\nwant\n%s", r.WriteRuns, wantGuarded)
		}
	}
}

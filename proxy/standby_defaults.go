package proxy

import (
	"context"
	"sync"
	"time"

	"github.com/pgowl/pgowl/route"
)

// Defaults a standby has not replayed yet.
//
// When the catalogue, read on the primary, finds that a role's or a database's default settings
// changed (search_path, statement_timeout, ...: ALTER ROLE or ALTER DATABASE ... SET), the pool
// retires the database's connections on every node
// (pool.RetireDatabase): a connection keeps the defaults of its login. A standby that has not
// replayed the ALTER ROLE or ALTER DATABASE yet still logs new connections in under the old
// default, pool.min_idle's refills among them, and those would go on serving sessions after the
// standby caught up: with a setting the role no longer starts with, and a search_path other than
// the one pgowl classifies their statements with.
//
// standbyDefaults follows each such change on every standby. The change committed before the
// catalogue noticed it, so the primary's WAL position in the monitor's first sample taken after
// that is at or past its commit (a primary on a timeline below the newest one seen is passed
// over). A standby whose replay position in a snapshot has reached that position had replayed the
// change when the snapshot was taken: its connections to the database dialled no later than that
// are retired (pool.RetireDatabaseOn), and those dialled after log in under the new default. A
// node is known by its name and address, and a node the last snapshot does not list is forgotten:
// a server a reload adds, or points a name at, is followed like the others, even when every node
// listed before had replayed the change (pool.min_idle dials it at once, perhaps before it has).
// So the last change of each database is kept, however long a standby stays down; a later change
// of the same database takes its place.
type standbyDefaults struct {
	mu      sync.Mutex
	pending map[string]*defaultsToReplay // by database
}

// defaultsToReplay is one database's change followed on the standbys.
type defaultsToReplay struct {
	noticedAt time.Time
	// position is the primary's WAL position in the first sample after noticedAt; 0 until the
	// monitor has taken one.
	position route.LSN
	// replayed holds the nodes (name@address) listed in the last snapshot whose connections were
	// retired once they had replayed it.
	replayed map[string]bool
}

// standbyRetirement says that node's connections to database dialled no later than before may
// carry the old defaults.
type standbyRetirement struct {
	node, database string
	before         time.Time
}

// noticed starts following a change of database's defaults that the catalogue noticed at at.
func (d *standbyDefaults) noticed(database string, at time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.pending == nil {
		d.pending = make(map[string]*defaultsToReplay)
	}
	d.pending[database] = &defaultsToReplay{noticedAt: at, replayed: make(map[string]bool)}
}

// due returns the retirements s allows: for each change followed, the standbys that s shows past
// its position and that were not retired for it yet. It forgets the nodes s does not list.
func (d *standbyDefaults) due(s *route.Snapshot) []standbyRetirement {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.pending) == 0 {
		return nil
	}
	var out []standbyRetirement
	listed := make(map[string]bool, len(s.Nodes))
	for _, n := range s.Nodes {
		listed[n.Name+"@"+n.Addr] = true
	}
	for database, p := range d.pending {
		if p.position == 0 {
			for _, n := range s.Nodes {
				if n.Up && n.Role == route.RolePrimary && n.Timeline >= s.NewestPrimaryTimeline &&
					n.SampledAt.After(p.noticedAt) && n.WALPosition != 0 {
					p.position = n.WALPosition
				}
			}
			if p.position == 0 {
				continue
			}
		}
		for _, n := range s.Nodes {
			node := n.Name + "@" + n.Addr
			if !p.replayed[node] && n.Up && n.Role == route.RoleStandby && n.WALPosition >= p.position {
				p.replayed[node] = true
				// The position was read during the node's poll, which ended before the snapshot
				// was taken: a login after TakenAt comes after the replay.
				out = append(out, standbyRetirement{node: n.Name, database: database, before: later(n.SampledAt, s.TakenAt)})
			}
		}
		for node := range p.replayed {
			if !listed[node] {
				delete(p.replayed, node)
			}
		}
	}
	return out
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// retireOnStandbyReplay retires, as the monitor's snapshots show standbys replaying a change of
// defaults, their connections logged in before they had (standbyDefaults), until ctx ends.
func (in *Instance) retireOnStandbyReplay(ctx context.Context) {
	for ctx.Err() == nil {
		in.nodes.WaitFor(ctx, func(s *route.Snapshot) bool {
			for _, r := range in.standbyDefaults.due(s) {
				in.log.Info().Str("node", r.node).Str("database", r.database).
					Msg("a standby replayed new default settings: its pooled connections logged in before are replaced")
				in.Pool.RetireDatabaseOn(r.node, r.database, r.before)
			}
			return false
		})
	}
}

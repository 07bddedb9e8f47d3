package pgowlclient

import (
	"fmt"
	"strconv"
	"strings"
)

// CostExceeded is what a QUERY_COST_EXCEEDED refusal says about the plan:
// which guard refused, the plan's estimated cost against the limit, and the
// plan nodes carrying most of the cost, so that a program (or a model writing
// SQL) can change the statement.
type CostExceeded struct {
	// Guard is the name of the guard whose limit was exceeded.
	Guard string
	// Node is the pgowl node that planned the statement.
	Node string
	// EstimatedCost is the plan's total estimated cost.
	EstimatedCost float64
	// Limit is the guard's max_cost in force for the session.
	Limit float64
	// PlanNodes are the nodes carrying most of the cost, in the DETAIL's order.
	PlanNodes []PlanNode
}

// PlanNode is one plan node of a cost refusal.
type PlanNode struct {
	// NodeType is PostgreSQL's node type, such as "Seq Scan".
	NodeType string
	// Relation is the scanned relation as schema.relation, empty if none.
	Relation string
	// Index is the index used, empty if none.
	Index string
	// Rows is the planner's estimate of the rows the node returns.
	Rows int64
	// OwnCost is the node's total cost minus its children's.
	OwnCost float64
	// SharePct is OwnCost as a percentage of the plan's total cost.
	SharePct float64
	// Extra holds the line's fields this package does not name.
	Extra map[string]string
}

// ParseCostDetail parses a QUERY_COST_EXCEEDED DETAIL:
//
//	guard=<name> node=<node> estimated_cost=<float> limit=<float>
//	plan_node=<Node Type> relation=<schema.relation or -> index=<index or -> rows=<int> own_cost=<float> share_pct=<float>
//	...
//
// with one plan_node line per node and values quoted Go-style where they hold
// a space, a quote or '='. A "-" relation or index becomes "". Unknown fields
// are kept in Extra (plan nodes) or ignored (first line), so that pgowl may
// add fields.
func ParseCostDetail(detail string) (*CostExceeded, error) {
	lines := strings.Split(strings.TrimRight(detail, "\n"), "\n")
	if len(lines) == 0 || strings.TrimSpace(lines[0]) == "" {
		return nil, fmt.Errorf("pgowlclient: QUERY_COST_EXCEEDED without a DETAIL")
	}
	head, err := parseFields(lines[0])
	if err != nil {
		return nil, fmt.Errorf("pgowlclient: QUERY_COST_EXCEEDED DETAIL line 1: %w", err)
	}
	c := &CostExceeded{}
	var seen []string
	for _, f := range head {
		switch f.key {
		case "guard":
			c.Guard = f.value
		case "node":
			c.Node = f.value
		case "estimated_cost":
			c.EstimatedCost, err = parseFloat(f)
		case "limit":
			c.Limit, err = parseFloat(f)
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("pgowlclient: QUERY_COST_EXCEEDED DETAIL line 1: %w", err)
		}
		seen = append(seen, f.key)
	}
	if len(seen) != 4 {
		return nil, fmt.Errorf("pgowlclient: QUERY_COST_EXCEEDED DETAIL line 1 %q: want guard= node= estimated_cost= limit=", abbreviate(lines[0]))
	}
	for i, line := range lines[1:] {
		n, err := parsePlanNode(line)
		if err != nil {
			return nil, fmt.Errorf("pgowlclient: QUERY_COST_EXCEEDED DETAIL line %d: %w", i+2, err)
		}
		c.PlanNodes = append(c.PlanNodes, n)
	}
	return c, nil
}

func parsePlanNode(line string) (PlanNode, error) {
	fields, err := parseFields(line)
	if err != nil {
		return PlanNode{}, err
	}
	var n PlanNode
	have := 0
	for _, f := range fields {
		switch f.key {
		case "plan_node":
			n.NodeType = f.value
		case "relation":
			n.Relation = dashIsNone(f.value)
		case "index":
			n.Index = dashIsNone(f.value)
		case "rows":
			n.Rows, err = strconv.ParseInt(f.value, 10, 64)
			if err != nil {
				err = fmt.Errorf("rows=%q is not an integer", f.value)
			}
		case "own_cost":
			n.OwnCost, err = parseFloat(f)
		case "share_pct":
			n.SharePct, err = parseFloat(f)
		default:
			if n.Extra == nil {
				n.Extra = map[string]string{}
			}
			n.Extra[f.key] = f.value
			continue
		}
		if err != nil {
			return PlanNode{}, err
		}
		have++
	}
	if have != 6 || n.NodeType == "" {
		return PlanNode{}, fmt.Errorf("%q: want plan_node= relation= index= rows= own_cost= share_pct=", abbreviate(line))
	}
	return n, nil
}

func parseFloat(f field) (float64, error) {
	v, err := strconv.ParseFloat(f.value, 64)
	if err != nil {
		return 0, fmt.Errorf("%s=%q is not a number", f.key, f.value)
	}
	return v, nil
}

func dashIsNone(v string) string {
	if v == "-" {
		return ""
	}
	return v
}

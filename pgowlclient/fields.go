package pgowlclient

import (
	"fmt"
	"strconv"
	"strings"
)

// field is one key=value pair of a pgowl DETAIL line.
type field struct {
	key, value string
}

// parseFields splits a line of space-separated key=value pairs, the shape of
// every machine-readable DETAIL pgowl sends. A value that holds a space, a
// quote or '=' is quoted Go-style (strconv.Quote) and is returned unquoted.
// Pairs keep their order; a key may not appear twice.
func parseFields(line string) ([]field, error) {
	var out []field
	seen := map[string]bool{}
	rest := line
	for {
		rest = strings.TrimLeft(rest, " ")
		if rest == "" {
			return out, nil
		}
		eq := strings.IndexByte(rest, '=')
		if eq <= 0 {
			return nil, fmt.Errorf("expected key=value at %q", abbreviate(rest))
		}
		key := rest[:eq]
		if strings.ContainsAny(key, " \"") {
			return nil, fmt.Errorf("malformed key %q", key)
		}
		rest = rest[eq+1:]
		var value string
		if strings.HasPrefix(rest, `"`) {
			quoted, err := strconv.QuotedPrefix(rest)
			if err != nil {
				return nil, fmt.Errorf("key %s: unterminated quoted value %q", key, abbreviate(rest))
			}
			value, err = strconv.Unquote(quoted)
			if err != nil {
				return nil, fmt.Errorf("key %s: bad quoted value %q: %w", key, quoted, err)
			}
			rest = rest[len(quoted):]
			if rest != "" && rest[0] != ' ' {
				return nil, fmt.Errorf("key %s: text %q right after a quoted value", key, abbreviate(rest))
			}
		} else {
			end := strings.IndexByte(rest, ' ')
			if end < 0 {
				end = len(rest)
			}
			value, rest = rest[:end], rest[end:]
		}
		if seen[key] {
			return nil, fmt.Errorf("key %s appears twice", key)
		}
		seen[key] = true
		out = append(out, field{key: key, value: value})
	}
}

func abbreviate(s string) string {
	const most = 40
	if len(s) <= most {
		return s
	}
	return s[:most] + "..."
}

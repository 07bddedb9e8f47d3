package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// formatSize is the value of the struct tag `format` that marks a field holding a byte size.
const formatSize = "size"

// sizeUnit is one unit accepted in a byte size.
type sizeUnit struct {
	symbol string
	bytes  uint64
}

// sizeUnits lists the accepted units, binary ones first so that FormatSize prefers them.
func sizeUnits() []sizeUnit {
	return []sizeUnit{
		{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10},
		{"TB", 1e12}, {"GB", 1e9}, {"MB", 1e6}, {"kB", 1e3},
		{"B", 1},
	}
}

// ParseSize parses a byte size: a plain integer in bytes, or an integer followed by
// B, kB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024), e.g. "64MiB" or "512kB".
func ParseSize(text string) (uint64, error) {
	trimmed := strings.TrimSpace(text)
	digits := 0
	for digits < len(trimmed) && trimmed[digits] >= '0' && trimmed[digits] <= '9' {
		digits++
	}
	if digits == 0 {
		return 0, fmt.Errorf("%q is not a size; write bytes or a number with a unit such as 64MiB, 1MB, 512kB", text)
	}
	number, err := strconv.ParseUint(trimmed[:digits], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is too large for a size", text)
	}
	symbol := strings.TrimSpace(trimmed[digits:])
	if symbol == "" {
		return number, nil
	}
	for _, unit := range sizeUnits() {
		if unit.symbol != symbol {
			continue
		}
		if number > math.MaxUint64/unit.bytes {
			return 0, fmt.Errorf("%q is too large for a size", text)
		}
		return number * unit.bytes, nil
	}
	return 0, fmt.Errorf("%q has unknown unit %q; use B, kB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024)", text, symbol)
}

// FormatSize renders a byte size with the largest unit that divides it exactly, e.g. 67108864 as "64MiB".
func FormatSize(bytes uint64) string {
	if bytes == 0 {
		return "0"
	}
	for _, unit := range sizeUnits() {
		if unit.bytes > 1 && bytes%unit.bytes == 0 {
			return strconv.FormatUint(bytes/unit.bytes, 10) + unit.symbol
		}
	}
	return strconv.FormatUint(bytes, 10)
}

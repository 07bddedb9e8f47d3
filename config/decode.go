package config

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Decode strictly decodes a nested map, as read from YAML or viper's AllSettings, onto Default() and validates the result.
//
// Keys match case-insensitively. A nil value leaves the default in place. Unknown keys anywhere,
// values of the wrong type and values that fail Validate are refused with errors naming the key path;
// every problem found is reported, joined with errors.Join. Strings are accepted for numbers,
// booleans, durations and sizes, so values from flags and environment variables decode too.
func Decode(settings map[string]any) (Config, error) {
	cfg := Default()
	var d decoder
	d.decodeStruct("", settings, reflect.ValueOf(&cfg).Elem())
	if err := joinErrors(d.problems); err != nil {
		return Config{}, err
	}
	cfg.Peering.resolveSelf()
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// decoder walks a nested map and a struct side by side, collecting every problem.
type decoder struct {
	problems []error
}

// fail records a problem with the value at key.
func (d *decoder) fail(key, format string, args ...any) {
	d.problems = append(d.problems, problemf(key, format, args...))
}

// decodeStruct decodes a mapping at path onto the struct dst.
func (d *decoder) decodeStruct(path string, raw any, dst reflect.Value) {
	mapping, ok := asMapping(raw)
	if !ok {
		d.fail(path, "must be a mapping of keys, got %s", describe(raw))
		return
	}
	fields := map[string]int{}
	for i := 0; i < dst.NumField(); i++ {
		fields[keyName(dst.Type().Field(i))] = i
	}
	names := make([]string, 0, len(mapping))
	for name := range mapping {
		names = append(names, name)
	}
	slices.Sort(names)
	seen := map[string]string{}
	for _, name := range names {
		key := joinKey(path, name)
		lower := strings.ToLower(name)
		index, known := fields[lower]
		if !known {
			d.problems = append(d.problems, &Error{Key: key, Problem: UnknownKey})
			continue
		}
		if first, twice := seen[lower]; twice {
			d.fail(key, "is given twice, also as %q (keys are case-insensitive)", first)
			continue
		}
		seen[lower] = name
		value := mapping[name]
		if value == nil {
			continue
		}
		field := dst.Type().Field(index)
		d.decodeValue(joinKey(path, lower), value, dst.Field(index), field.Tag.Get("format"))
	}
}

// decodeValue decodes raw at path onto dst; format is the field's `format` tag.
func (d *decoder) decodeValue(path string, raw any, dst reflect.Value, format string) {
	if isDuration(dst.Type()) {
		d.decodeDuration(path, raw, dst)
		return
	}
	switch dst.Kind() {
	case reflect.Struct:
		d.decodeStruct(path, raw, dst)
	case reflect.Slice:
		d.decodeList(path, raw, dst)
	case reflect.String:
		text, ok := raw.(string)
		if !ok {
			d.fail(path, "must be a string, got %s; quote the value", describe(raw))
			return
		}
		dst.SetString(text)
	case reflect.Bool:
		d.decodeBool(path, raw, dst)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		d.decodeInteger(path, raw, dst, format)
	default:
		d.fail(path, "has unsupported type %s", dst.Type())
	}
}

// decodeList decodes a list at path onto the slice dst, replacing any default.
func (d *decoder) decodeList(path string, raw any, dst reflect.Value) {
	items := reflect.ValueOf(raw)
	if items.Kind() != reflect.Slice && items.Kind() != reflect.Array {
		d.fail(path, "must be a list, got %s", describe(raw))
		return
	}
	list := reflect.MakeSlice(dst.Type(), 0, items.Len())
	for i := 0; i < items.Len(); i++ {
		itemPath := fmt.Sprintf("%s[%d]", path, i)
		item := reflect.New(dst.Type().Elem())
		if defaulter, ok := item.Interface().(listItemDefaulter); ok {
			defaulter.setDefaults()
		}
		value := items.Index(i).Interface()
		if value == nil {
			d.fail(itemPath, "is empty")
			continue
		}
		d.decodeValue(itemPath, value, item.Elem(), "")
		list = reflect.Append(list, item.Elem())
	}
	dst.Set(list)
}

// decodeBool decodes a boolean or a string such as "true" or "false".
func (d *decoder) decodeBool(path string, raw any, dst reflect.Value) {
	switch value := raw.(type) {
	case bool:
		dst.SetBool(value)
	case string:
		parsed, err := strconv.ParseBool(strings.TrimSpace(value))
		if err != nil {
			d.fail(path, "%q is not a boolean; use true or false", value)
			return
		}
		dst.SetBool(parsed)
	default:
		d.fail(path, "must be true or false, got %s", describe(raw))
	}
}

// decodeDuration decodes a Go duration string such as "250ms"; a bare 0 is accepted too.
func (d *decoder) decodeDuration(path string, raw any, dst reflect.Value) {
	if text, ok := raw.(string); ok {
		parsed, err := time.ParseDuration(strings.TrimSpace(text))
		if err != nil {
			d.fail(path, "%q is not a duration; write a number with a unit such as 250ms, 5s, 1m", text)
			return
		}
		dst.SetInt(int64(parsed))
		return
	}
	if number, ok := integerOf(raw); ok && number.isZero() {
		dst.SetInt(0)
		return
	}
	d.fail(path, "must be a duration with a unit such as \"250ms\" or \"5s\", got %s", describe(raw))
}

// decodeInteger decodes a number, a numeric string or, for sizes, a string such as "64MiB".
func (d *decoder) decodeInteger(path string, raw any, dst reflect.Value, format string) {
	number, ok := integerOf(raw)
	if text, isText := raw.(string); isText {
		ok = true
		if format == formatSize {
			parsed, err := ParseSize(text)
			if err != nil {
				d.fail(path, "%s", err)
				return
			}
			number = integer{magnitude: parsed}
		} else {
			parsed, err := parseInteger(text)
			if err != nil {
				d.fail(path, "%q is not an integer", text)
				return
			}
			number = parsed
		}
	}
	if !ok {
		d.fail(path, "must be an integer, got %s", describe(raw))
		return
	}
	if format == formatSize && number.negative {
		d.fail(path, "%s is negative; a size is at least 0", number)
		return
	}
	switch dst.Kind() {
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if number.negative {
			d.fail(path, "%s is negative", number)
			return
		}
		if dst.OverflowUint(number.magnitude) {
			d.fail(path, "%s is too large", number)
			return
		}
		dst.SetUint(number.magnitude)
	default:
		signed, fits := number.int64()
		if !fits || dst.OverflowInt(signed) {
			d.fail(path, "%s is too large", number)
			return
		}
		dst.SetInt(signed)
	}
}

// integer is a whole number of either sign, wide enough for int64 and uint64 values.
type integer struct {
	negative  bool
	magnitude uint64
}

// String renders the number in decimal.
func (n integer) String() string {
	if n.negative {
		return "-" + strconv.FormatUint(n.magnitude, 10)
	}
	return strconv.FormatUint(n.magnitude, 10)
}

// isZero reports whether the number is 0.
func (n integer) isZero() bool { return n.magnitude == 0 }

// int64 returns the number as an int64 and whether it fits.
func (n integer) int64() (int64, bool) {
	if n.negative {
		if n.magnitude > uint64(math.MaxInt64)+1 {
			return 0, false
		}
		return -int64(n.magnitude-1) - 1, true
	}
	if n.magnitude > math.MaxInt64 {
		return 0, false
	}
	return int64(n.magnitude), true
}

// parseInteger parses a decimal integer with an optional sign.
func parseInteger(text string) (integer, error) {
	trimmed := strings.TrimSpace(text)
	negative := strings.HasPrefix(trimmed, "-")
	trimmed = strings.TrimPrefix(strings.TrimPrefix(trimmed, "-"), "+")
	magnitude, err := strconv.ParseUint(trimmed, 10, 64)
	if err != nil {
		return integer{}, err
	}
	return integer{negative: negative && magnitude != 0, magnitude: magnitude}, nil
}

// integerOf converts a decoded number (any Go integer type, or a float with no fraction as JSON gives) to an integer.
func integerOf(raw any) (integer, bool) {
	value := reflect.ValueOf(raw)
	switch value.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		signed := value.Int()
		if signed < 0 {
			return integer{negative: true, magnitude: uint64(-(signed + 1)) + 1}, true
		}
		return integer{magnitude: uint64(signed)}, true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return integer{magnitude: value.Uint()}, true
	case reflect.Float32, reflect.Float64:
		float := value.Float()
		if float != math.Trunc(float) || math.Abs(float) >= 1<<63 {
			return integer{}, false
		}
		if float < 0 {
			return integer{negative: true, magnitude: uint64(-float)}, true
		}
		return integer{magnitude: uint64(float)}, true
	}
	return integer{}, false
}

// asMapping returns raw as a map with string keys, accepting the map types YAML and viper produce.
func asMapping(raw any) (map[string]any, bool) {
	switch mapping := raw.(type) {
	case map[string]any:
		return mapping, true
	case map[any]any:
		converted := make(map[string]any, len(mapping))
		for key, value := range mapping {
			name, ok := key.(string)
			if !ok {
				return nil, false
			}
			converted[name] = value
		}
		return converted, true
	}
	return nil, false
}

// describe names the kind of a decoded value for error messages.
func describe(raw any) string {
	switch value := raw.(type) {
	case nil:
		return "nothing"
	case string:
		return fmt.Sprintf("the string %q", value)
	case bool:
		return fmt.Sprintf("the boolean %t", value)
	}
	if _, ok := asMapping(raw); ok {
		return "a mapping"
	}
	value := reflect.ValueOf(raw)
	switch value.Kind() {
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return fmt.Sprintf("the number %v", raw)
	}
	return fmt.Sprintf("a value of type %T", raw)
}

// joinErrors returns nil for no errors, the error itself for one, and errors.Join otherwise.
func joinErrors(errs []error) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	return errors.Join(errs...)
}

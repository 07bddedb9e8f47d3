package config

import (
	"reflect"
	"strconv"
	"time"
)

// Key describes one configuration key for flags, environment variables and documentation.
type Key struct {
	// Path is the dotted key path, e.g. "routing.max_replica_lag".
	Path string
	// List is true for keys that hold a list (nodes, users, classify.functions.*, admin.users) rather than a scalar.
	List bool
	// Default is the default value as it would be written in the file; empty for lists.
	Default string
	// Help is a one-line description for flag usage.
	Help string
}

// Keys returns every scalar and list key of Config in declaration order; fields of list items are not included.
func Keys() []Key {
	var keys []Key
	collectKeys("", reflect.ValueOf(Default()), &keys)
	return keys
}

// collectKeys appends the keys of the struct value under the key path prefix.
func collectKeys(prefix string, value reflect.Value, keys *[]Key) {
	for i := 0; i < value.NumField(); i++ {
		field := value.Type().Field(i)
		path := joinKey(prefix, keyName(field))
		fieldValue := value.Field(i)
		switch {
		case fieldValue.Kind() == reflect.Struct && !isDuration(field.Type):
			collectKeys(path, fieldValue, keys)
		case fieldValue.Kind() == reflect.Slice:
			*keys = append(*keys, Key{Path: path, List: true, Help: field.Tag.Get("help")})
		default:
			*keys = append(*keys, Key{
				Path:    path,
				Default: formatScalar(fieldValue, field.Tag.Get("format")),
				Help:    field.Tag.Get("help"),
			})
		}
	}
}

// isDuration reports whether t is time.Duration, which is decoded from duration strings.
func isDuration(t reflect.Type) bool {
	return t == reflect.TypeFor[time.Duration]()
}

// keyName returns the configuration key of a struct field.
func keyName(field reflect.StructField) string {
	return field.Tag.Get("mapstructure")
}

// joinKey appends a key to a key path.
func joinKey(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}

// formatScalar renders a scalar field value as it would be written in the file.
func formatScalar(value reflect.Value, format string) string {
	if isDuration(value.Type()) {
		return time.Duration(value.Int()).String()
	}
	switch value.Kind() {
	case reflect.String:
		return value.String()
	case reflect.Bool:
		return strconv.FormatBool(value.Bool())
	case reflect.Int, reflect.Int64:
		if format == formatSize {
			return FormatSize(uint64(value.Int()))
		}
		return strconv.FormatInt(value.Int(), 10)
	case reflect.Uint64:
		if format == formatSize {
			return FormatSize(value.Uint())
		}
		return strconv.FormatUint(value.Uint(), 10)
	}
	return value.String()
}

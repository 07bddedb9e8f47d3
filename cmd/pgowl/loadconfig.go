package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"

	"github.com/pgowl/pgowl/config"
)

// environmentPrefix starts the name of every environment variable that sets a configuration key.
const environmentPrefix = "PGOWL_"

// configFileVariable is the one PGOWL_* variable that is not a key: it is left to the caller to name the file.
const configFileVariable = "PGOWL_CONFIG"

// addConfigFlags defines one string flag per scalar configuration key, named by its key path
// (--listen, --routing.max_replica_lag); config.Decode parses the values.
func addConfigFlags(flags *pflag.FlagSet) {
	for _, key := range config.Keys() {
		if key.List {
			continue
		}
		flags.String(key.Path, key.Default, key.Help)
	}
}

// loadConfig builds the configuration from, in rising precedence, the defaults, the YAML file
// (when file is not empty), the PGOWL_* variables in environ and the flags that were set.
//
// Every scalar key can be set by the variable PGOWL_ plus the upper-cased key path with "."
// replaced by "_" (PGOWL_ROUTING_MAX_REPLICA_LAG); list keys (PGOWL_NODES, PGOWL_USERS,
// PGOWL_CLASSIFY_FUNCTIONS_READONLY, PGOWL_CLASSIFY_FUNCTIONS_WRITES) take a JSON list. An unknown
// PGOWL_* variable is refused, except PGOWL_CONFIG. Unknown keys and invalid values anywhere are
// refused with an error naming the key.
func loadConfig(file string, flags *pflag.FlagSet, environ []string) (config.Config, error) {
	settings := viper.New()
	if file != "" {
		settings.SetConfigFile(file)
		settings.SetConfigType("yaml")
		if err := settings.ReadInConfig(); err != nil {
			return config.Config{}, fmt.Errorf("config file %q: %w", file, err)
		}
	}
	// Environment variables and flags both go in with Set, flags last, so that flags win;
	// viper's own BindEnv would read the process environment and BindPFlag would let an
	// unset flag's default shadow the file.
	if err := overlayEnvironment(settings, environ); err != nil {
		return config.Config{}, err
	}
	if flags != nil {
		overlayFlags(settings, flags)
	}
	return config.Decode(allSettings(settings))
}

// allSettings returns viper's merged settings as a nested map, keeping the keys whose value is
// null, which viper's AllSettings drops, so that config.Decode still refuses unknown ones.
func allSettings(settings *viper.Viper) map[string]any {
	merged := settings.AllSettings()
	for _, path := range settings.AllKeys() {
		if settings.Get(path) == nil {
			addNull(merged, strings.Split(path, "."))
		}
	}
	return merged
}

// addNull adds a null value at the key path parts unless a value is already on that path.
func addNull(mapping map[string]any, parts []string) {
	for _, part := range parts[:len(parts)-1] {
		value, taken := mapping[part]
		if !taken {
			value = map[string]any{}
			mapping[part] = value
		}
		nested, ok := value.(map[string]any)
		if !ok {
			return
		}
		mapping = nested
	}
	last := parts[len(parts)-1]
	if _, taken := mapping[last]; !taken {
		mapping[last] = nil
	}
}

// environmentName returns the environment variable that sets the key at path.
func environmentName(path string) string {
	return environmentPrefix + strings.ToUpper(strings.ReplaceAll(path, ".", "_"))
}

// overlayEnvironment sets every key named by a PGOWL_* entry of environ ("NAME=value") and
// refuses unknown PGOWL_* names.
func overlayEnvironment(settings *viper.Viper, environ []string) error {
	keysByVariable := map[string]config.Key{}
	for _, key := range config.Keys() {
		keysByVariable[environmentName(key.Path)] = key
	}
	var unknown []string
	for _, entry := range environ {
		name, value, _ := strings.Cut(entry, "=")
		if !strings.HasPrefix(name, environmentPrefix) || name == configFileVariable {
			continue
		}
		key, known := keysByVariable[name]
		if !known {
			unknown = append(unknown, name)
			continue
		}
		if !key.List {
			settings.Set(key.Path, value)
			continue
		}
		var list []any
		if err := json.Unmarshal([]byte(value), &list); err != nil {
			return fmt.Errorf("config: environment variable %s (key %s) must hold a JSON list: %v", name, key.Path, err)
		}
		settings.Set(key.Path, list)
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return fmt.Errorf("config: unknown environment variable %s; PGOWL_* variables must name a configuration key",
			strings.Join(unknown, ", "))
	}
	return nil
}

// overlayFlags sets the key of every configuration flag that was given on the command line;
// flags that were not set, and flags that are not configuration keys, are ignored.
func overlayFlags(settings *viper.Viper, flags *pflag.FlagSet) {
	scalar := map[string]bool{}
	for _, key := range config.Keys() {
		scalar[key.Path] = !key.List
	}
	flags.Visit(func(flag *pflag.Flag) {
		if scalar[flag.Name] {
			settings.Set(flag.Name, flag.Value.String())
		}
	})
}

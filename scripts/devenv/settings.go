package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"strings"
)

// exampleSettings is the settings file a missing -settings file starts
// from, relative to the repository root where make runs.
const exampleSettings = "local.settings.json.example"

// writeSettings points KAFKA_BROKERS and EVENTHUBS of the local.settings.json
// at path at the environment, keeping every other value and the file's
// layout. A missing file is created from local.settings.json.example.
func writeSettings(path string, e *env) error {
	text, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		text, err = os.ReadFile(exampleSettings)
	}
	if err != nil {
		return fmt.Errorf("-settings: %w", err)
	}
	values := map[string]string{
		"KAFKA_BROKERS": strings.Join(e.kafka.ListenAddrs(), ","),
		"EVENTHUBS":     e.hubs.ConnectionString(),
	}
	out := string(text)
	for name, value := range values {
		if out, err = setValue(out, name, value); err != nil {
			return fmt.Errorf("-settings %s: %w", path, err)
		}
	}
	var check struct{ Values map[string]string }
	if err := json.Unmarshal([]byte(out), &check); err != nil {
		return fmt.Errorf("-settings %s: the result is not JSON: %w", path, err)
	}
	return os.WriteFile(path, []byte(out), 0o600)
}

// setValue replaces the string value of "name" in a JSON text, which must
// hold it exactly once.
func setValue(text, name, value string) (string, error) {
	re := regexp.MustCompile(`"` + regexp.QuoteMeta(name) + `"\s*:\s*"(?:[^"\\]|\\.)*"`)
	if n := len(re.FindAllStringIndex(text, -1)); n != 1 {
		return "", fmt.Errorf("%q appears %d times in Values; want once", name, n)
	}
	encoded, err := json.Marshal(value)
	if err != nil {
		return "", err
	}
	return re.ReplaceAllLiteralString(text, `"`+name+`": `+string(encoded)), nil
}

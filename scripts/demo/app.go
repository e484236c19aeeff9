package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
)

// loadSettings reads the "Values" of a local.settings.json file.
func loadSettings(path string) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading settings: %w", err)
	}
	var f struct {
		Values map[string]string
	}
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(f.Values) == 0 {
		return nil, errors.New(path + ": no Values")
	}
	return f.Values, nil
}

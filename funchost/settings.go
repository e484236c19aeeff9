package funchost

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
)

// LocalSettings is a local.settings.json file as Core Tools reads it.
type LocalSettings struct {
	// Values are the app settings.
	Values map[string]string
	// LocalHTTPPort is Host.LocalHttpPort, 0 when unset.
	LocalHTTPPort int
}

// ReadLocalSettings reads a local.settings.json file. Values must be
// strings (Core Tools rejects other types); an encrypted file
// (IsEncrypted: true) cannot be read here.
func ReadLocalSettings(path string) (LocalSettings, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return LocalSettings{}, fmt.Errorf("local settings: %w", err)
	}
	var doc struct {
		IsEncrypted bool                       `json:"IsEncrypted"`
		Values      map[string]json.RawMessage `json:"Values"`
		Host        struct {
			LocalHTTPPort json.RawMessage `json:"LocalHttpPort"`
		} `json:"Host"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return LocalSettings{}, fmt.Errorf("local settings %s: %w", path, err)
	}
	if doc.IsEncrypted {
		return LocalSettings{}, errors.New("local settings " + path + ": IsEncrypted is true; decrypt it with `func settings decrypt` first")
	}
	ls := LocalSettings{Values: map[string]string{}}
	for _, k := range sortedKeys(doc.Values) {
		var s string
		if err := json.Unmarshal(doc.Values[k], &s); err != nil {
			return LocalSettings{}, fmt.Errorf("local settings %s: Values.%s: want a string, got %s", path, k, doc.Values[k])
		}
		ls.Values[k] = s
	}
	if p := doc.Host.LocalHTTPPort; len(p) > 0 && string(p) != "null" {
		var n int
		if err := json.Unmarshal(p, &n); err != nil {
			var s string
			if json.Unmarshal(p, &s) != nil {
				return LocalSettings{}, fmt.Errorf("local settings %s: Host.LocalHttpPort: want a port number", path)
			}
			if n, err = strconv.Atoi(s); err != nil {
				return LocalSettings{}, fmt.Errorf("local settings %s: Host.LocalHttpPort %q: want a port number", path, s)
			}
		}
		ls.LocalHTTPPort = n
	}
	return ls, nil
}

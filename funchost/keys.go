package funchost

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/ehmirror/ehmirror/functions"
)

// Keys are a function app's access keys. A request presents one as the
// "code" query parameter or the x-functions-key header.
type Keys struct {
	// Master is the admin key (named "master"): admin level, valid
	// everywhere.
	Master string
	// Host are host keys by name (e.g. "default"): function level, valid
	// for every function.
	Host map[string]string
	// Function are function keys by function name (case-insensitive) and
	// key name: function level, valid for that function only.
	Function map[string]map[string]string
}

// MasterKeyName is the key name of Keys.Master in identities (the keyid
// claim), as the host names it (ScriptConstants.DefaultMasterKeyName,
// azure-functions-host src/WebJobs.Script/ScriptConstants.cs, used by
// SecretManager.cs), so an operator's "by" reads "key master" locally as in
// Azure.
const MasterKeyName = "master"

// GenerateKeys returns random keys: a master key and a host key named
// "default".
func GenerateKeys() (Keys, error) {
	master, err := randomKey()
	if err != nil {
		return Keys{}, err
	}
	def, err := randomKey()
	if err != nil {
		return Keys{}, err
	}
	return Keys{Master: master, Host: map[string]string{"default": def}}, nil
}

func randomKey() (string, error) {
	b := make([]byte, 40)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate function key: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// DefaultKey returns the host key named "default", else any host key, else
// the master key: a key that calls every function-level function.
func (k Keys) DefaultKey() string {
	if v, ok := k.Host["default"]; ok {
		return v
	}
	for _, name := range sortedKeys(k.Host) {
		return k.Host[name]
	}
	return k.Master
}

func (k Keys) empty() bool {
	return k.Master == "" && len(k.Host) == 0 && len(k.Function) == 0
}

func (k Keys) clone() Keys {
	out := Keys{Master: k.Master, Host: map[string]string{}, Function: map[string]map[string]string{}}
	for n, v := range k.Host {
		out.Host[n] = v
	}
	for fn, keys := range k.Function {
		m := map[string]string{}
		for n, v := range keys {
			m[n] = v
		}
		out.Function[fn] = m
	}
	return out
}

// presentedKey returns the key a request presents: the x-functions-key
// header wins over ?code=, as in the host (azure-functions-host
// src/WebJobs.Script.WebHost/Security/Authentication/Keys/AuthenticationLevelHandler.cs).
func presentedKey(r *http.Request) string {
	if key := r.Header.Get("x-functions-key"); key != "" {
		return key
	}
	return r.URL.Query().Get("code")
}

func equalKey(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// authorize checks a request against a function's authLevel and returns
// the identity the host attaches: for a valid key the WebJobsAuthLevel
// identity (level "Admin" or "Function", keyid claim = key name), else the
// unauthenticated identity. ok is false when the level requires a key the
// request does not present.
func (k Keys) authorize(r *http.Request, function, authLevel string) (id functions.Identity, ok bool) {
	key := presentedKey(r)
	level, name := "", ""
	switch {
	case key == "":
	case equalKey(key, k.Master):
		level, name = "Admin", MasterKeyName
	default:
		for _, n := range sortedKeys(k.Host) {
			if equalKey(key, k.Host[n]) {
				level, name = "Function", n
				break
			}
		}
		if level == "" {
			for fn, keys := range k.Function {
				if !strings.EqualFold(fn, function) {
					continue
				}
				for _, n := range sortedKeys(keys) {
					if equalKey(key, keys[n]) {
						level, name = "Function", n
						break
					}
				}
			}
		}
	}
	switch {
	case authLevel == "admin" && level != "Admin":
		return functions.Identity{}, false
	case authLevel == "function" && level == "":
		return functions.Identity{}, false
	case level == "":
		return functions.AnonymousIdentity(), true
	default:
		return functions.KeyIdentity(level, name), true
	}
}

// keysFile is the JSON of a keys file (see LoadOrCreateKeys).
type keysFile struct {
	Master  string `json:"master"`
	Default string `json:"default"`
}

// LoadOrCreateKeys returns the master and default host keys kept in path,
// creating the file (mode 0600) with random keys when it does not exist,
// so that a local host restarted keeps its keys, as the real host does
// (it keeps them in storage).
func LoadOrCreateKeys(path string) (Keys, error) {
	raw, err := os.ReadFile(path)
	switch {
	case err == nil:
		var kf keysFile
		if err := json.Unmarshal(raw, &kf); err != nil || kf.Master == "" || kf.Default == "" {
			return Keys{}, fmt.Errorf("keys file %s: want {\"master\":…,\"default\":…}; delete it to get new keys", path)
		}
		return Keys{Master: kf.Master, Host: map[string]string{"default": kf.Default}}, nil
	case !errors.Is(err, fs.ErrNotExist):
		return Keys{}, fmt.Errorf("reading keys file: %w", err)
	}
	keys, err := GenerateKeys()
	if err != nil {
		return Keys{}, err
	}
	raw, err = json.Marshal(keysFile{Master: keys.Master, Default: keys.Host["default"]})
	if err != nil {
		return Keys{}, fmt.Errorf("encoding keys file: %w", err)
	}
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return Keys{}, fmt.Errorf("creating keys file: %w", err)
		}
	}
	if err := os.WriteFile(path, append(raw, '\n'), 0o600); err != nil {
		return Keys{}, fmt.Errorf("writing keys file: %w", err)
	}
	return keys, nil
}

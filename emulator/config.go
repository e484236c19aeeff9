package emulator

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// Defaults applied by [Start] to zero fields of [Config] and [HubConfig].
const (
	DefaultListen         = "127.0.0.1:5672"
	DefaultNamespace      = "emulator"
	DefaultKeyName        = "RootManageSharedAccessKey"
	DefaultKey            = "SAS_KEY_VALUE"
	DefaultRetention      = 24 * time.Hour
	DefaultMaxMessageSize = 1 << 20 // 1 MiB, the Standard tier's limit
	DefaultConsumerGroup  = "$Default"
	MaxPartitionCount     = 32
)

// HubConfig describes one event hub.
type HubConfig struct {
	// Name is the event hub's name (case-insensitive, as in the service).
	Name string
	// PartitionCount is the number of partitions, 1 to 32. Partition ids are
	// "0" to "PartitionCount-1".
	PartitionCount int
	// ConsumerGroups lists consumer groups besides $Default, which always exists.
	ConsumerGroups []string
	// Retention is how long events are kept (default 24h); older events are
	// dropped, measured with Config.Now.
	Retention time.Duration
	// MaxMessageSize is the largest delivery a producer may send, advertised as
	// the producer link's max-message-size (default 1 MiB).
	MaxMessageSize int64
	// MaxPartitionBytes, when positive, caps the bytes of retained events per
	// partition: the oldest events are dropped first. Counters keep counting.
	MaxPartitionBytes int64
	// Policies are the hub's shared access policies; their tokens are valid
	// for this hub only.
	Policies []Policy
}

// Config configures a [Server].
type Config struct {
	// Listen is the TCP address to listen on (default 127.0.0.1:5672; use
	// port 0 to pick a free port).
	Listen string
	// TLSListen, when set, is the address of an amqps listener (the service
	// uses port 5671), which needs TLSCertificate.
	TLSListen string
	// WebSocketListen, when set, is the address of an AMQP over WebSockets
	// listener (path /$servicebus/websocket, subprotocol amqp; the service
	// uses wss on port 443): over TLS with TLSCertificate, plain otherwise.
	WebSocketListen string
	// TLSCertificate is the certificate of the TLS and WebSocket listeners
	// (see SelfSignedCertificate).
	TLSCertificate *tls.Certificate
	// Namespace names the emulated namespace in error descriptions
	// (default "emulator").
	Namespace string
	// KeyName and Key are the shared access key name and key that SAS tokens
	// are checked against (defaults RootManageSharedAccessKey and
	// SAS_KEY_VALUE, like Microsoft's emulator).
	KeyName, Key string
	// Policies are more shared access policies of the namespace, besides
	// KeyName/Key (which has the Manage right).
	Policies []Policy
	// EntraID, when it has signing keys or trusts loopback clients, accepts
	// Entra ID tokens next to SAS tokens and applies role assignments.
	EntraID EntraID
	// AcceptAnyToken skips SAS token validation: every put-token succeeds and
	// links need no claim.
	AcceptAnyToken bool
	// Hubs are the event hubs that exist from the start.
	Hubs []HubConfig
	// DataDir, when set, keeps every partition's events, sequence numbers
	// and offsets in files under this directory across restarts: events are
	// written to the OS before they are acknowledged, and loaded by Start.
	// Hubs are still defined by Hubs (a hub's files are kept by name).
	DataDir string
	// Now is the clock used for enqueued times and retention (default
	// time.Now). SAS token expiry is always checked against the wall clock,
	// because the SDK signs tokens with the wall clock.
	Now func() time.Time
	// Logger receives the emulator's logs (default: discarded).
	Logger *slog.Logger
	// Quota, when it has throughput units, throttles the namespace's
	// ingress as the service does (default off).
	Quota Quota

	// heartbeat overrides the interval of the emulator's empty frames (tests).
	heartbeat time.Duration
}

func (h HubConfig) withDefaults() HubConfig {
	if h.Retention <= 0 {
		h.Retention = DefaultRetention
	}
	if h.MaxMessageSize <= 0 {
		h.MaxMessageSize = DefaultMaxMessageSize
	}
	return h
}

// validate reports the first problem with h, naming the field.
func (h HubConfig) validate() error {
	if h.Name == "" {
		return errors.New("Name: empty event hub name")
	}
	if strings.ContainsAny(h.Name, "/\\?#") {
		return fmt.Errorf("Name: event hub name %q contains a character out of '/', '\\', '?', '#'", h.Name)
	}
	if h.PartitionCount < 1 || h.PartitionCount > MaxPartitionCount {
		return fmt.Errorf("PartitionCount: %d is out of range 1..%d", h.PartitionCount, MaxPartitionCount)
	}
	for i, cg := range h.ConsumerGroups {
		if cg == "" || strings.Contains(cg, "/") {
			return fmt.Errorf("ConsumerGroups[%d]: invalid consumer group name %q", i, cg)
		}
	}
	return validatePolicies(h.Policies)
}

// configFile is Microsoft's Event Hubs emulator Config.json, plus this
// emulator's additions: SharedAccessPolicies and RoleAssignments per
// namespace and per entity, and EntraId per namespace.
type configFile struct {
	UserConfig *struct {
		NamespaceConfig []struct {
			Type                 string
			Name                 string
			SharedAccessPolicies []Policy
			RoleAssignments      []RoleAssignment
			EntraID              *struct {
				SigningKeys                     []string
				TrustUnsignedTokensFromLoopback bool
				Audiences                       []string
			} `json:"EntraId"`
			Quota    *quotaFile
			Entities []struct {
				Name           string
				PartitionCount json.RawMessage
				ConsumerGroups []struct {
					Name string
				}
				SharedAccessPolicies []Policy
				RoleAssignments      []struct {
					Principal string
					Role      string
				}
			}
		}
	}
}

// quotaFile is a namespace's "Quota" in Config.json (see [Quota]).
type quotaFile struct {
	ThroughputUnits      int
	IngressBytesPerUnit  int64
	IngressEventsPerUnit int64
	// Period is a Go duration, e.g. "1s" or "100ms".
	Period string
}

func (f *quotaFile) quota() (Quota, error) {
	q := Quota{ThroughputUnits: f.ThroughputUnits, IngressBytesPerUnit: f.IngressBytesPerUnit, IngressEventsPerUnit: f.IngressEventsPerUnit}
	if f.Period != "" {
		d, err := time.ParseDuration(f.Period)
		if err != nil {
			return q, fmt.Errorf("Period: %q is not a duration such as \"1s\" or \"100ms\"", f.Period)
		}
		q.Period = d
	}
	return q, q.validate()
}

// LoadConfigFile reads hubs from a JSON file in the format of Microsoft's
// Event Hubs emulator Config.json; see [LoadConfig].
func LoadConfigFile(path string) ([]HubConfig, error) {
	cfg, err := LoadConfig(path)
	return cfg.Hubs, err
}

// LoadConfig reads a JSON file in the format of Microsoft's Event Hubs
// emulator Config.json:
//
//	{"UserConfig":{"NamespaceConfig":[{"Type":"EventHub","Name":"emulatorNs1",
//	  "Entities":[{"Name":"eh1","PartitionCount":"2","ConsumerGroups":[{"Name":"cg1"}]}]}]}}
//
// PartitionCount may be a string (as Microsoft writes it) or a number. This
// emulator's additions, all optional: "SharedAccessPolicies"
// ([{"Name","Key","Rights":["Listen","Send","Manage"]}]) on a namespace or an
// entity; "RoleAssignments" ([{"Principal":"<oid>","Role":"Azure Event Hubs
// Data Sender","Hub":""}]) on a namespace, or without Hub on an entity; and
// "EntraId" ({"SigningKeys":["<PEM>"],"TrustUnsignedTokensFromLoopback":true,
// "Audiences":[…]}) on a namespace; and "Quota" ({"ThroughputUnits":1,
// "IngressBytesPerUnit":1048576,"IngressEventsPerUnit":1000,"Period":"1s"},
// see [Quota]) on one namespace. The returned Config has Hubs, Policies,
// EntraID and Quota set. Errors are one line naming the file and the offending
// field.
func LoadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("%s: cannot read config: %w", path, errors.Unwrap(err))
	}
	return parseConfigFile(path, data)
}

func parseConfig(path string, data []byte) ([]HubConfig, error) {
	cfg, err := parseConfigFile(path, data)
	return cfg.Hubs, err
}

func parseConfigFile(path string, data []byte) (Config, error) {
	var f configFile
	var cfg Config
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&f); err != nil {
		return cfg, fmt.Errorf("%s: %s", path, describeJSONError(data, err))
	}
	if f.UserConfig == nil {
		return cfg, fmt.Errorf("%s: UserConfig: missing", path)
	}
	seen := map[string]string{}
	for i, ns := range f.UserConfig.NamespaceConfig {
		nsField := fmt.Sprintf("UserConfig.NamespaceConfig[%d]", i)
		if ns.Type != "" && !strings.EqualFold(ns.Type, "EventHub") {
			return cfg, fmt.Errorf("%s: %s.Type: unsupported type %q, want \"EventHub\"", path, nsField, ns.Type)
		}
		if err := validatePolicies(ns.SharedAccessPolicies); err != nil {
			return cfg, fmt.Errorf("%s: %s.SharedAccess%w", path, nsField, err)
		}
		cfg.Policies = append(cfg.Policies, ns.SharedAccessPolicies...)
		cfg.EntraID.RoleAssignments = append(cfg.EntraID.RoleAssignments, ns.RoleAssignments...)
		if e := ns.EntraID; e != nil {
			cfg.EntraID.SigningKeys = append(cfg.EntraID.SigningKeys, e.SigningKeys...)
			cfg.EntraID.TrustUnsignedFromLoopback = cfg.EntraID.TrustUnsignedFromLoopback || e.TrustUnsignedTokensFromLoopback
			cfg.EntraID.Audiences = append(cfg.EntraID.Audiences, e.Audiences...)
		}
		if ns.Quota != nil {
			if cfg.Quota != (Quota{}) {
				return cfg, fmt.Errorf("%s: %s.Quota: a second namespace quota; the emulator serves one namespace", path, nsField)
			}
			q, err := ns.Quota.quota()
			if err != nil {
				return cfg, fmt.Errorf("%s: %s.Quota.%w", path, nsField, err)
			}
			cfg.Quota = q
		}
		for j, e := range ns.Entities {
			field := fmt.Sprintf("%s.Entities[%d]", nsField, j)
			n, err := parsePartitionCount(e.PartitionCount)
			if err != nil {
				return cfg, fmt.Errorf("%s: %s.PartitionCount: %w", path, field, err)
			}
			h := HubConfig{Name: e.Name, PartitionCount: n, Policies: e.SharedAccessPolicies}
			for _, cg := range e.ConsumerGroups {
				h.ConsumerGroups = append(h.ConsumerGroups, cg.Name)
			}
			if err := h.validate(); err != nil {
				if strings.HasPrefix(err.Error(), "Policies") {
					return cfg, fmt.Errorf("%s: %s.SharedAccess%w", path, field, err)
				}
				return cfg, fmt.Errorf("%s: %s.%w", path, field, err)
			}
			for _, ra := range e.RoleAssignments {
				cfg.EntraID.RoleAssignments = append(cfg.EntraID.RoleAssignments, RoleAssignment{Principal: ra.Principal, Role: ra.Role, Hub: e.Name})
			}
			key := strings.ToLower(h.Name)
			if prev, dup := seen[key]; dup {
				return cfg, fmt.Errorf("%s: %s.Name: duplicate event hub %q (also at %s)", path, field, h.Name, prev)
			}
			seen[key] = field
			cfg.Hubs = append(cfg.Hubs, h)
		}
	}
	if _, err := parseEntraID(cfg.EntraID); err != nil {
		return cfg, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

func parsePartitionCount(raw json.RawMessage) (int, error) {
	if len(raw) == 0 {
		return 0, errors.New("missing")
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return 0, fmt.Errorf("%q is not an integer", s)
		}
		return n, nil
	}
	var n int
	if err := json.Unmarshal(raw, &n); err != nil {
		return 0, fmt.Errorf("%s is not an integer", raw)
	}
	return n, nil
}

// describeJSONError turns a JSON decoding error into one line with the line
// and column, and the field for type errors.
func describeJSONError(data []byte, err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		line, col := position(data, syn.Offset)
		return fmt.Sprintf("invalid JSON at line %d, column %d: %v", line, col, syn)
	case errors.As(err, &typ):
		line, col := position(data, typ.Offset)
		return fmt.Sprintf("%s: JSON %s where %s is expected (line %d, column %d)", typ.Field, typ.Value, jsonKind(typ.Type), line, col)
	case errors.Is(err, io.EOF):
		return "invalid JSON: empty file"
	}
	return "invalid JSON: " + strings.ReplaceAll(err.Error(), "\n", " ")
}

// jsonKind names what JSON a Go type is decoded from.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	}
	return "a number"
}

func position(data []byte, offset int64) (line, col int) {
	if offset > int64(len(data)) {
		offset = int64(len(data))
	}
	before := data[:offset]
	line = 1 + bytes.Count(before, []byte{'\n'})
	col = int(offset) - bytes.LastIndexByte(before, '\n')
	return line, col
}

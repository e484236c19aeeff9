package emulator

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ehmirror/ehmirror/partitionkey"
)

// pyEvent is one event as testdata/pyclient/client.py saw it.
type pyEvent struct {
	Body           string  `json:"body"`
	Origin         string  `json:"origin"`
	SequenceNumber int64   `json:"sequence_number"`
	Offset         string  `json:"offset"`
	PartitionKey   *string `json:"partition_key"`
}

// pyClientResult is what testdata/pyclient/client.py prints.
type pyClientResult struct {
	PartitionIDs       []string          `json:"partition_ids"`
	PartitionIDsCall   []string          `json:"partition_ids_call"`
	EmptyBefore        bool              `json:"empty_before"`
	LastSequenceNumber int64             `json:"last_sequence_number"`
	MaxBatchBytes      int64             `json:"max_batch_bytes"`
	Oversized          string            `json:"oversized"`
	MissingHub         string            `json:"missing_hub"`
	WrongKey           string            `json:"wrong_key"`
	Received           []pyEvent         `json:"received"`
	FromSequence       []pyEvent         `json:"from_sequence"`
	Keyed              pyEvent           `json:"keyed"`
	LastEnqueued       map[string]string `json:"last_enqueued"`
}

// pythonWithSDK returns a Python interpreter that can import Microsoft's
// Event Hubs SDK: $EHMIRROR_PYTHON, Debian's /usr/bin/python3 (package
// python3-azure) or python3 on PATH.
func pythonWithSDK(t *testing.T) string {
	t.Helper()
	candidates := []string{os.Getenv("EHMIRROR_PYTHON"), "/usr/bin/python3", "python3"}
	for _, py := range candidates {
		if py == "" {
			continue
		}
		if exec.Command(py, "-c", "import azure.eventhub, websocket").Run() == nil {
			return py
		}
	}
	t.Fatal("TestPythonSDK needs Microsoft's Python SDK and websocket-client: apt-get install python3-azure python3-websocket (make test installs them when CI=true)")
	return ""
}

// countingHandler counts the log records with one message.
type countingHandler struct {
	msg string
	n   *atomic.Int64
}

func (h countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h countingHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h countingHandler) WithGroup(string) slog.Handler            { return h }
func (h countingHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.n.Add(1)
	}
	return nil
}

// TestPythonSDK runs Microsoft's Python SDK (azure-eventhub 5.11 on its own
// AMQP stack, pyamqp) against the emulator over AMQP over WebSockets with
// SAS checks on. Its stack differs from go-amqp and rhea where the service
// is lenient: it reads performative fields by position (so every field is
// sent), sends $cbs and $management requests without reply-to, merges the
// attach reply's properties into its own, detaches links after ending their
// session, and asks for the WebSocket subprotocol AMQPWSB10.
func TestPythonSDK(t *testing.T) {
	t.Parallel()
	py := pythonWithSDK(t)
	cert, certPEM, _, err := SelfSignedCertificate("localhost", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	var protocolErrors atomic.Int64
	srv := startServer(t, Config{Hubs: prodHubs(), WebSocketListen: "127.0.0.1:0", TLSCertificate: &cert,
		Logger: slog.New(countingHandler{msg: "closing connection on protocol error", n: &protocolErrors})})
	_, port, _ := net.SplitHostPort(srv.WebSocketAddr())
	keyed := partitionkey.Partition("py-key", 4)
	ctx := testContext(t, 3*time.Minute)
	cs := "Endpoint=sb://localhost/;SharedAccessKeyName=" + DefaultKeyName + ";SharedAccessKey=" + DefaultKey
	cmd := exec.CommandContext(ctx, py, "client.py", cs, "prod.test1", ca, "https://localhost:"+port, strconv.Itoa(keyed))
	cmd.Dir = "testdata/pyclient"
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3 client.py: %v\nstdout: %s\nstderr: %s", err, out, stderr.String())
	}
	var res pyClientResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("client output %q: %v", out, err)
	}
	want := []string{"0", "1", "2", "3"}
	if !slices.Equal(res.PartitionIDs, want) || !slices.Equal(res.PartitionIDsCall, want) || !res.EmptyBefore {
		t.Fatalf("management results: %+v", res)
	}
	if res.MaxBatchBytes != DefaultMaxMessageSize || res.Oversized != "ValueError" {
		t.Fatalf("batch limit %d (want the attach's max-message-size %d), oversized event: %s", res.MaxBatchBytes, DefaultMaxMessageSize, res.Oversized)
	}
	// The error types the SDK's own live tests expect from the service.
	if res.MissingHub != "ConnectError" || res.WrongKey != "AuthenticationError" {
		t.Fatalf("missing hub: %s, want ConnectError; wrong key: %s, want AuthenticationError", res.MissingHub, res.WrongKey)
	}
	stored := srv.Events("prod.test1", 1)
	check := func(what string, got []pyEvent, first int) {
		t.Helper()
		for i, ev := range got {
			seq := first + i
			if ev.Body != "py-"+strconv.Itoa(seq+1) || ev.Origin != "py" || ev.SequenceNumber != int64(seq) || ev.Offset != stored[seq].Offset {
				t.Fatalf("%s: event %d: %+v, stored offset %s", what, i, ev, stored[seq].Offset)
			}
		}
	}
	if len(res.Received) != 3 || len(res.FromSequence) != 2 {
		t.Fatalf("received %+v, from sequence number 1: %+v", res.Received, res.FromSequence)
	}
	check("from the start", res.Received, 0)
	check("from sequence number 1", res.FromSequence, 1)
	last := stored[len(stored)-1]
	if res.LastSequenceNumber != last.SequenceNumber || res.LastEnqueued["sequence_number"] != strconv.FormatInt(last.SequenceNumber, 10) || res.LastEnqueued["offset"] != last.Offset {
		t.Fatalf("last enqueued: properties %d, tracked %v; stored %+v", res.LastSequenceNumber, res.LastEnqueued, last)
	}
	k := srv.Events("prod.test1", keyed)
	if res.Keyed.Body != "py-keyed" || res.Keyed.PartitionKey == nil || *res.Keyed.PartitionKey != "py-key" || k[len(k)-1].PartitionKey != "py-key" {
		t.Fatalf("keyed event %+v, stored in partition %d: %+v", res.Keyed, keyed, k)
	}
	if single := srv.Events("prod.test1", 2); len(single) != 1 || string(single[0].Body) != "py-single" {
		t.Fatalf("event sent to partition 2: %+v", single)
	}
	if n := protocolErrors.Load(); n != 0 {
		t.Fatalf("the emulator closed %d of the SDK's connections on a protocol error", n)
	}
}

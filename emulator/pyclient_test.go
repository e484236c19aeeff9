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

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
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

// pythonServer is an emulator with AMQP over WebSockets on TLS, as
// Microsoft's Python SDK reaches the service, and how a script reaches it.
type pythonServer struct {
	srv  *Server
	py   string // the interpreter
	conn string // the connection string
	ca   string // the CA file
	wss  string // the custom endpoint address (https://localhost:PORT)
}

// startPythonServer starts the emulator with prodHubs and SAS checks on
// for the Python SDK's scripts in testdata/pyclient.
func startPythonServer(t *testing.T, logger *slog.Logger) pythonServer {
	t.Helper()
	py := pythonWithSDK(t)
	cert, certPEM, _, err := SelfSignedCertificate("localhost", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, Config{Hubs: prodHubs(), WebSocketListen: "127.0.0.1:0", TLSCertificate: &cert, Logger: logger})
	_, port, _ := net.SplitHostPort(srv.WebSocketAddr())
	cs := "Endpoint=sb://localhost/;SharedAccessKeyName=" + DefaultKeyName + ";SharedAccessKey=" + DefaultKey
	return pythonServer{srv: srv, py: py, conn: cs, ca: ca, wss: "https://localhost:" + port}
}

// run runs a script of testdata/pyclient and returns its standard output.
func (ps pythonServer) run(ctx context.Context, t *testing.T, script string, args ...string) []byte {
	t.Helper()
	cmd := exec.CommandContext(ctx, ps.py, append([]string{script}, args...)...)
	cmd.Dir = "testdata/pyclient"
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3 %s: %v\nstdout: %s\nstderr: %s", script, err, out, stderr.String())
	}
	return out
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
	var protocolErrors atomic.Int64
	ps := startPythonServer(t, slog.New(countingHandler{msg: "closing connection on protocol error", n: &protocolErrors}))
	srv := ps.srv
	keyed := partitionkey.Partition("py-key", 4)
	ctx := testContext(t, 3*time.Minute)
	out := ps.run(ctx, t, "client.py", ps.conn, "prod.test1", ps.ca, ps.wss, strconv.Itoa(keyed))
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

// TestPythonSDKReceivesPartitionsConcurrently receives every partition of
// a hub at once with the Python SDK's synchronous client over WebSockets,
// one partition loaded and three empty, as a processor starting from
// cut-over checkpoints does. The emulator puts every event on the wire at
// once; receive_batch gets them all. (receive, one event per turn, gets
// about one per 3 s here because each turn on an empty partition waits
// for its socket's 1 s read timeout: the SDK's own pace, on the service
// too, Azure/azure-sdk-for-python#27314; see testdata/pyclient/partitions.py.)
func TestPythonSDKReceivesPartitionsConcurrently(t *testing.T) {
	t.Parallel()
	ps := startPythonServer(t, nil)
	ctx := testContext(t, 3*time.Minute)
	const hub, want = "prod.test2", 100
	var events []*azeventhubs.EventData
	for i := range want {
		events = append(events, &azeventhubs.EventData{
			Body:       []byte(strings.Repeat("x", 200) + strconv.Itoa(i)),
			Properties: map[string]any{"kafka.topic": "orders", "kafka.partition": int64(0), "kafka.offset": int64(i)},
		})
	}
	sendBatch(ctx, t, newProducer(t, ps.srv.ConnectionString(), hub), &azeventhubs.EventDataBatchOptions{PartitionID: ptr("0")}, events...)
	out := ps.run(ctx, t, "partitions.py", ps.conn, hub, ps.ca, ps.wss, strconv.Itoa(want), "batch")
	var res struct {
		Counts  map[string]int `json:"counts"`
		Seconds float64        `json:"seconds"`
		Errors  []string       `json:"errors"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("partitions.py output %q: %v", out, err)
	}
	t.Logf("received %v in %.1f s", res.Counts, res.Seconds)
	if res.Counts["0"] != want || len(res.Errors) > 0 {
		t.Fatalf("partition 0: %d of %d events within 60 s (all: %v, errors %v)", res.Counts["0"], want, res.Counts, res.Errors)
	}
	if d := ps.srv.Stats().EventsDelivered; d != want {
		t.Fatalf("the emulator delivered %d events, want %d", d, want)
	}
}

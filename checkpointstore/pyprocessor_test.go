package checkpointstore_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/ehmirror/ehmirror/cutover"
	"github.com/ehmirror/ehmirror/cutover/filter"
)

// pythonWithSDK returns a Python interpreter that can import Microsoft's
// Event Hubs SDK with its Blob checkpoint store: $EHMIRROR_PYTHON,
// Debian's /usr/bin/python3 (package python3-azure) or python3 on PATH.
// Without one the test fails: it is a required peer (make test installs
// it when CI=true).
func pythonWithSDK(t *testing.T) string {
	t.Helper()
	for _, py := range []string{os.Getenv("EHMIRROR_PYTHON"), "/usr/bin/python3", "python3"} {
		if py != "" && exec.Command(py, "-c", "import azure.eventhub.extensions.checkpointstoreblob, websocket").Run() == nil {
			return py
		}
	}
	t.Fatal("the Python processor needs Microsoft's Python SDK and websocket-client: apt-get install python3-azure python3-websocket (make test installs them when CI=true)")
	return ""
}

// pyEndpoint is how the Python processor reaches the emulator: its
// connection string's namespace (which names the checkpoint blobs), the
// CA file and the AMQP over WebSockets endpoint.
type pyEndpoint struct {
	conn, ca, wss string
}

// receiveWithPython runs testdata/pyprocessor/processor.py on hub with the
// Blob checkpoint store in container and returns what it received. The
// Python filter of docs/cutover.md runs on every event with the watermarks; its
// verdict must be the Go filter's.
func receiveWithPython(ctx context.Context, t *testing.T, py string, ep pyEndpoint, hub, storage, container string, want int64, watermarks []cutover.Watermark, f *filter.Filter) []receivedEvent {
	t.Helper()
	wm, err := json.Marshal(watermarks)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, py, "processor.py", ep.conn, hub, ep.ca, ep.wss, storage, container, strconv.FormatInt(want, 10), string(wm))
	cmd.Dir = filepath.Join("testdata", "pyprocessor")
	return receiveWithCommand(t, "Python", cmd, hub, want, f)
}

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2/checkpoints"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ehmirror/ehmirror/cutover"
	"github.com/ehmirror/ehmirror/funchost"
	"github.com/ehmirror/ehmirror/internal/azurite"
)

// cutoverAnswer is the body of POST /api/cutover.
type cutoverAnswer struct {
	DryRun  bool           `json:"dry_run"`
	Message string         `json:"message"`
	Error   string         `json:"error"`
	Field   string         `json:"field"`
	Cutover cutover.Result `json:"cutover"`
}

func postCutover(t *testing.T, url, body string) (int, cutoverAnswer, string) {
	t.Helper()
	code, _, raw := call(t, "POST", url, body)
	var a cutoverAnswer
	if err := json.Unmarshal([]byte(raw), &a); err != nil {
		t.Fatalf("cutover %s: %d %s", body, code, raw)
	}
	return code, a, raw
}

// TestCutoverRoute runs POST /api/cutover through the real handler under
// the local Functions host, with kfake, the emulator and Azurite: refused
// while the application's group has a member and while the mirror is
// behind it, a dry run that writes nothing, then checkpoints that the
// azeventhubs Blob store lists as planned, logged with who and when; bad
// input names the field; the storage key never shows; then the edges of
// checkCutoverStoreEdges.
func TestCutoverRoute(t *testing.T) {
	app := buildApp(t)
	storage := azurite.Start(t)
	cc := azurite.NewContainer(t, storage, "checkpoints")
	w := newWorld(t)
	w.produce(t, 200) // 40 per topic
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// The application's group reads prod.test1 and prod.test2 and commits
	// half of every partition.
	group, err := kgo.NewClient(kgo.SeedBrokers(w.cluster.ListenAddrs()...), kgo.SASL(plainAuth()), kgo.ConsumerGroup("app"),
		kgo.ConsumeTopics("prod.test1", "prod.test2"), kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(group.Close)
	ends := map[string]map[int32]int64{"prod.test1": {}, "prod.test2": {}}
	for read := 0; read < 80; {
		fs := group.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatalf("poll: %v", err)
		}
		fs.EachRecord(func(r *kgo.Record) { ends[r.Topic][r.Partition] = max(ends[r.Topic][r.Partition], r.Offset+1) })
		read += fs.NumRecords()
	}
	commits := map[string]map[int32]kgo.EpochOffset{}
	for topic, ps := range ends {
		commits[topic] = map[int32]kgo.EpochOffset{}
		for p, end := range ps {
			commits[topic][p] = kgo.EpochOffset{Epoch: -1, Offset: end / 2}
		}
	}
	var commitErr error
	group.CommitOffsetsSync(ctx, commits, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		commitErr = err
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					commitErr = err
				}
			}
		}
	})
	if commitErr != nil {
		t.Fatalf("commit: %v", commitErr)
	}

	settings := w.settings()
	settings["CUTOVER_STORAGE"] = storage
	settings["CUTOVER_CONTAINER"] = "checkpoints"
	out := &capture{}
	h, front := startHost(t, app, settings, out)
	key := h.Keys().DefaultKey()
	url := front.URL + "/api/cutover?code=" + key

	code, a, raw := postCutover(t, url, `{"group":"app"}`)
	if code != http.StatusConflict || !strings.Contains(a.Error, `"app" has 1 member(s)`) {
		t.Fatalf("with a member: %d %s", code, raw)
	}
	group.Close()
	code, a, raw = postCutover(t, url, `{"group":"app","force":true}`)
	if code != http.StatusConflict || !strings.Contains(a.Error, "not mirrored yet") || !strings.Contains(a.Error, "mirrored to 0 of") {
		t.Fatalf("before mirroring: %d %s", code, raw)
	}
	if res, err := h.InvokeTimer(ctx, "MirrorTimer", funchost.TimerInvocation{}); err != nil || !res.Succeeded() {
		t.Fatalf("timer: %v %+v", err, res)
	}
	if _, st, raw := call(t, "GET", front.URL+"/api/status?code="+key, ""); totalLag(t, st) != 0 {
		t.Fatalf("the timer's drain left lag: %s", raw)
	}

	// The member may take a moment to be gone from the coordinator.
	deadline := time.Now().Add(60 * time.Second)
	for {
		code, a, raw = postCutover(t, url, `{"group":"app"}`)
		if code != http.StatusConflict || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if code != http.StatusOK || !a.DryRun || a.Cutover.Written || len(a.Cutover.Blobs) != 0 ||
		strings.Join(a.Cutover.Hubs, ",") != "prod.test1,prod.test2" || len(a.Cutover.Partitions) != 8 || len(a.Cutover.Watermarks) != 8 {
		t.Fatalf("dry run: %d %s", code, raw)
	}
	namespace := emulatorNamespace(t, w.emu.ConnectionString())
	bs, err := checkpoints.NewBlobStore(cc, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cps, err := bs.ListCheckpoints(ctx, namespace, "prod.test1", "$Default", nil); err != nil || len(cps) != 0 {
		t.Fatalf("a dry run wrote checkpoints: %v, %v", cps, err)
	}
	for _, wm := range a.Cutover.Watermarks {
		if want := commits[wm.Topic][wm.Partition].Offset; wm.Offset != want || !wm.Committed {
			t.Errorf("watermark %+v, want offset %d", wm, want)
		}
	}

	code, a, raw = postCutover(t, url, `{"group":"app","confirm":true,"by":"alice"}`)
	confirmed := a.Cutover.Partitions
	if code != http.StatusOK || a.DryRun || !a.Cutover.Written || len(a.Cutover.Blobs) != 16 || a.Cutover.Namespace != namespace {
		t.Fatalf("confirm: %d %s", code, raw)
	}
	for _, hub := range []string{"prod.test1", "prod.test2"} {
		cps, err := bs.ListCheckpoints(ctx, namespace, hub, "$Default", nil)
		if err != nil || len(cps) != 4 {
			t.Fatalf("%s: checkpoints %v, %v", hub, cps, err)
		}
		for _, cp := range cps {
			var plan *cutover.PartitionPlan
			for i, p := range a.Cutover.Partitions {
				if p.Hub == hub && p.PartitionID == cp.PartitionID {
					plan = &a.Cutover.Partitions[i]
				}
			}
			if plan == nil || *cp.SequenceNumber != plan.Checkpoint.Sequence || *cp.Offset != plan.Checkpoint.Offset {
				t.Errorf("%s partition %s: stored %d/%s, planned %+v", hub, cp.PartitionID, *cp.SequenceNumber, *cp.Offset, plan)
			}
		}
	}
	if !regexp.MustCompile(`msg="cut-over checkpoint written" by="key default \(alice\)" at=\S+ group=app hub=prod.test1 partition=\d`).MatchString(out.String()) {
		t.Errorf("the written checkpoints are not logged with who and when:\n%s", out)
	}

	for body, field := range map[string]string{
		`{"group":""}`:                                  "group",
		`{"grop":"app"}`:                                "grop",
		`{"group":"app","topics":["nope"]}`:             "topics",
		`{"group":"nobody"}`:                            "group",
		`{"group":"app","consumer_group":7}`:            "consumer_group",
		`{"group":"app","confirm":true,"container":""}`: "",
	} {
		code, a, raw := postCutover(t, url, body)
		if field == "" {
			if code != http.StatusOK {
				t.Errorf("%s: %d %s", body, code, raw)
			}
			continue
		}
		if code != http.StatusBadRequest || a.Field != field {
			t.Errorf("%s: %d %s, want 400 naming %s", body, code, raw, field)
		}
	}
	checkCutoverStoreEdges(ctx, t, url, w, storedCheckpoints{cc: cc, bs: bs, namespace: namespace}, confirmed)
	if strings.Contains(out.String()+raw, azurite.Key) {
		t.Error("the storage account key leaked into the logs")
	}
}

func emulatorNamespace(t *testing.T, conn string) string {
	t.Helper()
	p, err := azeventhubs.ParseConnectionString(conn)
	if err != nil {
		t.Fatal(err)
	}
	if p.FullyQualifiedNamespace == "" {
		t.Fatal(fmt.Errorf("no namespace in the emulator's connection string"))
	}
	return p.FullyQualifiedNamespace
}

package mirror_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/ehmirror/ehmirror/mirror"
)

// metadataRequests records the Metadata requests kfake answers: how many
// asked for every topic, and the topics the others named.
type metadataRequests struct {
	mu    sync.Mutex
	all   int
	named [][]string
}

func (e *env) countMetadata() *metadataRequests {
	mr := &metadataRequests{}
	e.cluster.ControlKey(int16(kmsg.Metadata), func(req kmsg.Request) (kmsg.Response, error, bool) {
		e.cluster.KeepControl()
		r := req.(*kmsg.MetadataRequest)
		mr.mu.Lock()
		defer mr.mu.Unlock()
		if r.Topics == nil {
			mr.all++
			return nil, nil, false
		}
		var names []string
		for _, t := range r.Topics {
			if t.Topic != nil {
				names = append(names, *t.Topic)
			}
		}
		mr.named = append(mr.named, names)
		return nil, nil, false
	})
	return mr
}

func (mr *metadataRequests) counts() (all int, named [][]string) {
	mr.mu.Lock()
	defer mr.mu.Unlock()
	return mr.all, slices.Clone(mr.named)
}

// A drain checks its topics' identity every CommitInterval with Metadata
// requests for its own topics, not for the whole cluster: their cost does
// not grow with the topics it does not mirror (issue 48). The whole
// cluster is listed at the drain's start only, to select the topics, and
// not every few seconds for the Kafka client's routing either.
func TestIdentityChecksAskForTheMirroredTopicsOnly(t *testing.T) {
	e := newEnv(t)
	const topic = "prod.test2"
	for i := range 200 { // one batch each: one fetch each
		e.produce(&kgo.Record{Topic: topic, Partition: 0, Value: fmt.Appendf(nil, "v%d", i)})
	}
	slowFetches(e, 25*time.Millisecond) // 200 fetches: about 5 s
	filter, err := mirror.CompileTopicFilter(topic, "")
	if err != nil {
		t.Fatal(err)
	}
	m := e.newMirror(mirror.Options{FetchBytes: 1, Topics: filter})
	mr := e.countMetadata()
	rep := e.drain(m, mirror.Limits{})
	if rep.Failed() || rep.Records != 200 || !rep.CaughtUp() {
		t.Fatalf("drain: %s", rep.Summary())
	}
	all, named := mr.counts()
	checks := 0
	for _, names := range named {
		if slices.Equal(names, []string{topic}) {
			checks++
		}
	}
	t.Logf("%d Metadata requests for every topic, %d naming topics (%d naming %s alone) over %s", all, len(named), checks, topic, rep.Duration)
	if checks < 5 {
		t.Errorf("%d identity checks named %s alone over a drain of %s with a CommitInterval of 100 ms, want at least 5", checks, topic, rep.Duration)
	}
	if all > 3 {
		t.Errorf("%d Metadata requests listed every topic of the cluster over a drain of %s, want at most 3 (the drain's start)", all, rep.Duration)
	}
}

package statuspage

import (
	"strings"
	"testing"
	"time"

	"github.com/ehmirror/ehmirror/mirror"
)

func TestRenderEscapesAndBars(t *testing.T) {
	var b strings.Builder
	err := Render(&b, Page{
		Time:     time.Now(),
		Reason:   `event hub <x>: unauthorized`,
		Problems: []string{`<script>alert(1)</script>`},
		Lag: &mirror.LagReport{Total: 30, Partitions: []mirror.PartitionLag{
			{Topic: "a", Partition: 0, Hub: "a", Committed: mirror.NoOffset, End: 10, Lag: 10},
			{Topic: "a", Partition: 1, Hub: "a", Committed: 5, End: 25, Lag: 20},
		}},
		Drains:   []*mirror.Report{{Run: "timer", Duration: 9 * time.Second, Budget: 10 * time.Second, Stopped: mirror.StopMaxDuration}},
		Settings: map[string]string{"KAFKA_SASL_PASSWORD": "(set, redacted)"},
	})
	if err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{
		"&lt;script&gt;alert(1)&lt;/script&gt;", `class="badge bad"`, `<td class="n committed">none</td>`,
		`style="width: 50%"`, `style="width: 100%"`, `class="over" style="width: 90%"`, "(set, redacted)",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(page, "<script>") {
		t.Error("a problem was not escaped")
	}
}

package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ehmirror/ehmirror/mirror"
)

// Names returns the name of every app setting the handler reads, in the
// order of docs/settings.md's tables, then the cut-over's.
func Names() []string {
	return []string{
		KafkaBrokers, MirrorSchedule, EventHubsConnection, EventHubsNamespace,
		KafkaGroup, KafkaTopicsInclude, KafkaTopicsExclude, KafkaStartOffset,
		KafkaSASLMechanism, KafkaSASLUsername, KafkaSASLPassword, KafkaTLS, KafkaTLSCAPEM,
		EventHubsClientID, MirrorRoutes, MirrorPartitioning, MirrorMaxDuration, MirrorFollow, MirrorDeduplicate,
		KafkaOAuthTokenEndpoint, KafkaOAuthClientID, KafkaOAuthClientSecret, KafkaOAuthScope, KafkaOAuthExtensions,
		KafkaAWSRegion, KafkaAWSRoleARN, KafkaAWSWebIdentityScope, KafkaAWSAccessKeyID, KafkaAWSSecretAccessKey,
		KafkaAWSSessionToken, KafkaAWSSTSEndpoint,
		KafkaTLSSkipVerify, KafkaTLSCertPEM, KafkaTLSKeyPEM, KafkaTLSKeyPassword, KafkaTLSCertWarnDays,
		KafkaSessionTimeout, MirrorMaxRecords, MirrorMaxBytes, MirrorInFlightBytes, MirrorGapPolicy,
		MirrorOversizePolicy, MirrorCatchUpDuration, MirrorMaxBacklogAge, MirrorHTTPDeadline, WebsiteTimeZone, MirrorMaxPauseAge,
		CutoverStorage, CutoverStorageURI, CutoverContainer,
	}
}

// ownedPrefixes are the prefixes of the names the mirror owns: an
// environment variable that starts with one (in any case) and is not a
// setting is most likely a misspelt one, which would otherwise be ignored
// silently while the default applies.
func ownedPrefixes() []string {
	return []string{"KAFKA_", "MIRROR_", "EVENTHUBS", "CUTOVER_", "EHMIRROR_"}
}

// toolVariables are the project's own environment variables of tests and
// tools (EHMIRROR_*): not settings, and not misspelt ones either. A handler
// started by a test inherits them.
func toolVariables() []string {
	return []string{
		"EHMIRROR_BENCH_CHILD", "EHMIRROR_CACHE", "EHMIRROR_FAULTS_LOG", "EHMIRROR_FAULTS_REPORT",
		"EHMIRROR_FAULTS_SEED", "EHMIRROR_MODEL_CHECKS", "EHMIRROR_MODEL_STEPS", "EHMIRROR_PYTHON",
		"EHMIRROR_SCREENSHOT", "EHMIRROR_SOAK", "EHMIRROR_SOAK_DURATION", "EHMIRROR_SOAK_FAULTS",
	}
}

// UnknownSettings returns one problem for each environment entry (os.Environ's
// "NAME=value" form, or bare names) whose name starts with KAFKA_, MIRROR_,
// EVENTHUBS, CUTOVER_ or EHMIRROR_ and is not a setting, naming the closest
// setting when one is close ("did you mean `MIRROR_MAX_DURATION`?"). These
// problems do not stop the mirror: the settings it does read are checked by
// Load; an unknown name only means a value the operator meant is ignored.
// Values are never read, so secrets cannot leak through them.
func UnknownSettings(environ []string) Problems {
	known := Names()
	var out Problems
	seen := map[string]bool{}
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if name == "" || seen[name] || slices.Contains(known, name) || slices.Contains(toolVariables(), name) {
			continue
		}
		upper := strings.ToUpper(name)
		if !slices.ContainsFunc(ownedPrefixes(), func(p string) bool { return strings.HasPrefix(upper, p) }) {
			continue
		}
		seen[name] = true
		p := Problem{Setting: name, Doc: mirror.DocsURL + "settings.md"}
		if near := closestSetting(name, known); near != "" {
			p.Message = fmt.Sprintf("is not a setting and is ignored; did you mean `%s`?", near)
			p.Remedy = fmt.Sprintf("rename `%s` to `%s` (or remove it)%s", name, near, whereToChange)
		} else {
			p.Message = "is not a setting and is ignored"
			p.Remedy = fmt.Sprintf("remove `%s`, or use one of the settings in docs/settings.md%s", name, whereToChange)
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b Problem) int { return strings.Compare(a.Setting, b.Setting) })
	return out
}

// closestSetting returns the setting whose name is nearest to name (edit
// distance, ignoring case), or "" when none is near enough to be a
// plausible misspelling: at most a third of the name's length, and at
// most 4 edits.
func closestSetting(name string, known []string) string {
	best, bestDist := "", -1
	for _, k := range known {
		d := editDistance(strings.ToUpper(name), strings.ToUpper(k))
		if bestDist < 0 || d < bestDist {
			best, bestDist = k, d
		}
	}
	if bestDist < 0 || bestDist > 4 || bestDist*3 > len(name) {
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance between a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

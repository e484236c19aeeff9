//go:build race

package sasltest_test

// raceDetector scales the end-to-end test down under the race detector,
// which makes the mirror several times slower.
const raceDetector = true

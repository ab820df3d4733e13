//go:build !race

package coldstart_test

// raceDetector is true when the tests run with -race.
const raceDetector = false

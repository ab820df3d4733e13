//go:build race

package coldstart_test

// raceDetector is true when the tests run with -race, which slows
// compress/flate (the deployment zip) about twentyfold.
const raceDetector = true

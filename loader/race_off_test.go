//go:build !race

package loader_test

const raceDetector = false

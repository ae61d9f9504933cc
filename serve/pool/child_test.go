package pool_test

// childEnv makes the test binary a child of a benchmark.
const childEnv = "GGLOAD_POOL_CHILD"

func child(arg string) int { return 2 }

module github.com/ggload/ggload

go 1.26.8

require (
	github.com/ebitengine/purego v0.11.3
	golang.org/x/sys v0.50.0
)

require github.com/google/go-cmp v0.7.0

module github.com/ggload/ggload

go 1.26.8

require (
	github.com/ebitengine/purego v0.11.3
	golang.org/x/sys v0.50.0
)

require (
	github.com/google/go-cmp v0.7.0
	github.com/openai/openai-go/v3 v3.105.0
)

require (
	github.com/coder/websocket v1.8.15 // indirect
	github.com/tidwall/gjson v1.20.1 // indirect
	github.com/tidwall/match v1.1.1 // indirect
	github.com/tidwall/pretty v1.2.1 // indirect
	github.com/tidwall/sjson v1.2.5 // indirect
)

//go:build !unix

package ggml

import "errors"

func anonPage() ([]byte, error) {
	return nil, errors.New("ggml: anonymous pages are not implemented on this platform")
}

func freePage([]byte) {}

package main

// The options of llama.cpp's common/arg.cpp that belong with model
// loading, placement, fit and devices but that ggload refuses, each with
// the reason. TestOptionsOfThePin holds this list to the pin's source.

const (
	whyDocker   = "Docker Hub's model repositories: ggload loads a local file, a URL given as MODEL (read in place), -mu's download or a Hugging Face repository's (-hf)"
	whyDraft    = "model repositories: ggload's draft model is a local file (-md), and resolves no repository or quantization name"
	whyPreset   = "llama-server presets: they download a model and set serving options"
	whyFitPrint = "llama-fit-params' own option: ggload plan prints the estimate, and its --json carries it"
)

var unsupportedOptions = []struct {
	names []string
	value string
	why   string
}{
	{[]string{"-fitp", "--fit-print"}, "[on|off]", whyFitPrint},
	{[]string{"-dr", "--docker-repo"}, "[<repo>/]<model>[:quant]", whyDocker},
	{[]string{"--spec-draft-hf", "-hfd", "-hfrd", "--hf-repo-draft"}, "<user>/<model>[:quant]", whyDraft},
	{[]string{"--embd-gemma-default"}, "", whyPreset},
	{[]string{"--fim-qwen-1.5b-default"}, "", whyPreset},
	{[]string{"--fim-qwen-3b-default"}, "", whyPreset},
	{[]string{"--fim-qwen-7b-default"}, "", whyPreset},
	{[]string{"--fim-qwen-7b-spec"}, "", whyPreset},
	{[]string{"--fim-qwen-14b-spec"}, "", whyPreset},
	{[]string{"--fim-qwen-30b-default"}, "", whyPreset},
	{[]string{"--gpt-oss-20b-default"}, "", whyPreset},
	{[]string{"--gpt-oss-120b-default"}, "", whyPreset},
	{[]string{"--vision-gemma-4b-default"}, "", whyPreset},
	{[]string{"--vision-gemma-12b-default"}, "", whyPreset},
}

// addUnsupported registers the refused options, so that they are named
// with their reason instead of being unknown.
func (f *placeFlags) addUnsupported(s *optionSet) {
	s.group("unsupported")
	for _, u := range unsupportedOptions {
		s.add(&option{names: u.names, value: u.value, unsupported: u.why})
	}
}

// Package experiments is the framework behind `ringside run` and
// `ringside report`: a registry of experiments, per-repetition seeds, a tidy
// CSV sink with a meta.json beside it, a progress display, and the markdown
// report with gonum/plot figures. The experiments themselves live in
// sub-packages and are collected by experiments/catalog.
package experiments

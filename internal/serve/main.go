package serve

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

// Main is the skeleton every ringside daemon shares: run gets the
// command-line arguments and a context that SIGINT or SIGTERM cancels; an
// error is printed with the command's name and exits 1.
func Main(name string, run func(ctx context.Context, args []string) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	os.Exit(exitCode(os.Stderr, name, err))
}

func exitCode(w io.Writer, name string, err error) int {
	// --help, and a shutdown by signal, are not failures.
	if err == nil || errors.Is(err, flag.ErrHelp) || errors.Is(err, context.Canceled) {
		return 0
	}
	fmt.Fprintf(w, "%s: %v\n", name, err)
	return 1
}

// Logger returns a text logger on stderr at level (debug, info, warn or
// error).
func Logger(level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log-level %q: want debug, info, warn or error", level)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lv})), nil
}

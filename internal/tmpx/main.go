package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/ringside/ringside/experiments/backend/ringnodes"
)

func main() {
	ctx := context.Background()
	bin, _ := ringnodes.FindRingnode(ctx)
	dir, _ := os.MkdirTemp("", "tmpx")
	r, err := ringnodes.StartLocal(ctx, 16, ringnodes.Options{Bin: bin, Dir: dir, Args: []string{"--replicas", "2"}})
	if err != nil {
		panic(err)
	}
	defer r.Close()
	coord, err := ringnodes.WaitSettled(ctx, r.Addrs(), 30*time.Second)
	if err != nil {
		panic(err)
	}
	fmt.Println("coordinator", coord, "addrs", r.Addrs())
	os.WriteFile("/tmp/tmpx.ready", []byte(coord), 0o644)
	time.Sleep(8 * time.Second)
	res, err := ringnodes.KillCoordinator(ctx, r)
	fmt.Printf("%+v %v\n", res, err)
	time.Sleep(2 * time.Second)
}

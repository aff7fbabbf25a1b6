// Go side of the interop check (run_interop.sh): the real github.com/containerd/ttrpc as server
// ("server PATH") or as client ("client PATH") of our C++ peer. Built in GOPATH mode from Debian's
// golang-github-containerd-ttrpc-dev sources, offline.
package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/containerd/ttrpc"
	"github.com/gogo/protobuf/types"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func fail(f string, a ...interface{}) { fmt.Printf("FAIL: "+f+"\n", a...); os.Exit(1) }

func main() {
	mode, path := os.Args[1], os.Args[2]
	if mode == "server" {
		s, err := ttrpc.NewServer(ttrpc.WithServerHandshaker(ttrpc.UnixSocketRequireSameUser()))
		if err != nil {
			fail("%v", err)
		}
		s.Register("test.Svc", map[string]ttrpc.Method{
			"Echo": func(ctx context.Context, un func(interface{}) error) (interface{}, error) {
				var v types.StringValue
				if err := un(&v); err != nil {
					return nil, err
				}
				md, _ := ttrpc.GetMetadata(ctx)
				ns, _ := md.Get("containerd-namespace-ttrpc")
				_, hasDeadline := ctx.Deadline()
				return &types.StringValue{Value: fmt.Sprintf("%s|%v|%v", v.Value, ns, hasDeadline)}, nil
			},
			"Fail": func(ctx context.Context, un func(interface{}) error) (interface{}, error) {
				return nil, status.Errorf(codes.FailedPrecondition, "go says no")
			},
		})
		os.Remove(path)
		l, err := net.Listen("unix", path)
		if err != nil {
			fail("%v", err)
		}
		s.Serve(context.Background(), l)
		return
	}
	conn, err := net.Dial("unix", path)
	if err != nil {
		fail("dial: %v", err)
	}
	c := ttrpc.NewClient(conn)
	defer c.Close()
	ctx := ttrpc.WithMetadata(context.Background(), ttrpc.MD{"containerd-namespace-ttrpc": []string{"k8s.io"}})
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var out types.StringValue
	if err := c.Call(ctx, "test.Svc", "Echo", &types.StringValue{Value: "from-go"}, &out); err != nil {
		fail("Echo: %v", err)
	}
	fmt.Println("echo:", out.Value)
	if out.Value != "from-go|k8s.io|true" {
		fail("Echo answered %q", out.Value)
	}
	for i := 0; i < 100; i++ {
		if err := c.Call(ctx, "test.Svc", "Echo", &types.StringValue{Value: fmt.Sprint(i)}, &out); err != nil {
			fail("Echo %d: %v", i, err)
		}
	}
	err = c.Call(ctx, "test.Svc", "Fail", &types.StringValue{}, &out)
	if st, _ := status.FromError(err); st.Code() != codes.NotFound {
		fail("Fail: want NotFound, got %v", err)
	}
	fmt.Println("fail:", err)
	err = c.Call(ctx, "test.Svc", "Nope", &types.StringValue{}, &out)
	if st, _ := status.FromError(err); st.Code() != codes.Unimplemented {
		fail("Nope: want Unimplemented, got %v", err)
	}
	fmt.Println("nope:", err)
	fmt.Println("GO CLIENT OK")
}

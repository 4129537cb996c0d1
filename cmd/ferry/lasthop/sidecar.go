package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
)

// startSidecar starts `ferry run -c <config>` as member, posting to the
// receiver on receiverPort, with an ops port of its own.
func (e *runEnv) startSidecar(_ context.Context, member string, receiverPort int) (*proc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	ops, err := freePort()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "run", "-c", e.config)
	cmd.Env = childEnviron(
		childEnv+"=1",
		"FERRY_MEMBER_ID="+member,
		"WEBHOOK_SECRET="+e.secret,
		fmt.Sprintf("LASTHOP_RECEIVER_URL=http://127.0.0.1:%d/ferry/%s", receiverPort, streamName),
		fmt.Sprintf("LASTHOP_LISTEN=127.0.0.1:%d", ops),
	)
	return startProc(e.procName(member), e.dir, cmd, nil)
}

# desc: plumbing check for --host-cmd: the guest waits for one TCP line from the host side
# lab: host (needs --host-cmd; not run by rxe-lab-all)
server() { timeout 60 nc -l -p 18700; }
client() { sleep 1; echo "hello from $SELF" | nc "$PEER" 18700; }

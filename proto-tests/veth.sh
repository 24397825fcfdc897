# Shared by the scripts that run rocex between two network namespaces (source it).

# veth_pair NS_A NS_B DEV_A DEV_B ADDR_A ADDR_B: two namespaces joined by a veth pair, each
# end up with MTU 9000 and its address (/24), loopback up.
veth_pair() {
  local na=$1 nb=$2 va=$3 vb=$4 ipa=$5 ipb=$6 x ns dev addr
  ip netns add "$na"
  ip netns add "$nb"
  ip link add "$va" type veth peer name "$vb"
  ip link set "$va" netns "$na"
  ip link set "$vb" netns "$nb"
  for x in "$na:$va:$ipa" "$nb:$vb:$ipb"; do
    IFS=: read -r ns dev addr <<<"$x"
    ip -n "$ns" link set lo up
    ip -n "$ns" link set "$dev" mtu 9000 up
    ip -n "$ns" addr add "$addr/24" dev "$dev"
  done
}

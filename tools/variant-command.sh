# variant-command.sh (sourced by build-variant.sh and check-variants.sh, in
# a build folder): variant_command MEMBER SRC OUT [FLAGS...] prints the
# build's own nvcc command for runtime/cuda's MEMBER (e.g. matmul.o), with
# no depfile, SRC compiled in place of the member's source, FLAGS added and
# the object written to OUT; empty when the build has no such object.
variant_command() {
    local member=$1 src=$2 out=$3 cmd
    shift 3
    cmd=$(ninja -t commands "obj/runtime/cuda/$member" 2>/dev/null | tail -1)
    [ -n "$cmd" ] || return 1
    cmd=${cmd/-MD -MF obj\/runtime\/cuda\/$member.d /}
    echo "${cmd/ -c ..\/runtime\/cuda\/${member%.o}.cu -o obj\/runtime\/cuda\/$member/ $* -c $src -o $out}"
}

# SPDX-License-Identifier: MIT
# bash completion for agentbox(1).  Installed by `make install` to
# $(PREFIX)/share/bash-completion/completions/agentbox.

_agentbox_profiles()
{
	agentbox __profiles 2>/dev/null
}

_agentbox()
{
	local cur prev cmd i
	COMPREPLY=()
	cur=${COMP_WORDS[COMP_CWORD]}
	prev=${COMP_WORDS[COMP_CWORD-1]}
	cmd=""
	for ((i = 1; i < COMP_CWORD; i++)); do
		case ${COMP_WORDS[i]} in
		--) [[ $cmd == run || $cmd == explain ]] && { _command_offset $((i + 1)) 2>/dev/null; return; } ;;
		-*) ;;
		*) if [[ -z $cmd ]]; then cmd=${COMP_WORDS[i]}; fi ;;
		esac
	done
	if [[ -z $cmd ]]; then
		COMPREPLY=($(compgen -W "run check explain doctor allow test-escape report review apply discard help version --help --version" -- "$cur"))
		return
	fi
	case $prev in
	-p|--profile)
		COMPREPLY=($(compgen -W "$(_agentbox_profiles)" -- "$cur"))
		[[ $cur == */* || $cur == .* ]] && COMPREPLY+=($(compgen -f -- "$cur"))
		return ;;
	-w|--workspace)
		COMPREPLY=($(compgen -d -- "$cur")); return ;;
	--log|-o|--output|--read|--write|--learn)
		COMPREPLY=($(compgen -f -- "$cur")); return ;;
	--env)
		COMPREPLY=($(compgen -e -- "$cur")); return ;;
	--format)
		COMPREPLY=($(compgen -W "tap junit json" -- "$cur")); return ;;
	--only)
		COMPREPLY=($(compgen -W "$(agentbox test-escape --list 2>/dev/null | cut -d' ' -f1)" -- "$cur")); return ;;
	--allow|--otlp|--ask-timeout)
		return ;;
	--ask-profile)
		COMPREPLY=($(compgen -f -- "$cur")); return ;;
	esac
	local opts
	case $cmd in
	run) opts="-p --profile -w --workspace --pty --no-pty --log --otlp -q --quiet --allow --read --write --env --trace --trace=best-effort --ask --ask-timeout --ask-profile --review --learn -h --help --" ;;
	explain) opts="-p --profile -w --workspace --json --allow --read --write --env --review -h --help" ;;
	check) opts="-h --help"
		[[ $cur != -* ]] && { COMPREPLY=($(compgen -W "$(_agentbox_profiles)" -- "$cur") $(compgen -f -- "$cur")); return; } ;;
	doctor) opts="--json -h --help" ;;
	allow) opts="-w --workspace -h --help" ;;
	review) opts="-w --workspace --log --diff -h --help" ;;
	discard) opts="-w --workspace --log -h --help" ;;
	apply) opts="-w --workspace --log -h --help"
		[[ $cur != -* ]] && { COMPREPLY=($(compgen -f -- "$cur")); return; } ;;
	test-escape) opts="-p --profile --format -o --output --only --list -q --quiet -h --help" ;;
	report) opts="--json -h --help"
		[[ $cur != -* ]] && { COMPREPLY=($(compgen -f -- "$cur")); return; } ;;
	help) COMPREPLY=($(compgen -W "run check explain doctor allow test-escape report review apply discard" -- "$cur")); return ;;
	*) return ;;
	esac
	if [[ $cur == -* || $cmd != run ]]; then
		COMPREPLY=($(compgen -W "$opts" -- "$cur"))
	else
		COMPREPLY=($(compgen -W "$opts" -- "$cur") $(compgen -c -- "$cur"))
	fi
}
complete -F _agentbox agentbox

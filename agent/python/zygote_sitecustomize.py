# cxxrun's forkserver (agent/warm/zygote.h): each worker runs its own sitecustomize and usercustomize.
import sys
sys.modules.setdefault('usercustomize', None)

// The host emulation (../qnb_cuda_host.h, force-included) provides everything.
#pragma once
